// Schedule grouping (src/scheduler/schedule.ts): one croner job per pattern and zone.
import { describe, expect, it } from 'vitest';
import { groupSchedules } from '../../src/scheduler/schedule.ts';
import { keyPolicy } from '../rotation/harness.ts';

describe('groupSchedules', () => {
  it('makes one group per pattern and zone, in policy order, and leaves keys without a schedule to the sweep', () => {
    const keys = [
      keyPolicy('a', 'o', { schedule: '0 3 * * 1' }),
      keyPolicy('b', 'o', { schedule: '0 3 * * 1', timezone: 'Europe/Berlin' }),
      keyPolicy('c', 'o', { schedule: '0 3 * * 1' }),
      keyPolicy('d', 'o'),
    ];
    expect(groupSchedules(keys)).toEqual([
      { pattern: '0 3 * * 1', timezone: 'UTC', keyIds: ['a', 'c'] },
      { pattern: '0 3 * * 1', timezone: 'Europe/Berlin', keyIds: ['b'] },
    ]);
  });
});
