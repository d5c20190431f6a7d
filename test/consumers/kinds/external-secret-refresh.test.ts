// An ExternalSecret's refresh settings, as external-secrets' shouldRefresh reads them: force-sync
// is acted on unless refreshPolicy is CreatedOnce, or refreshInterval is 0 under Periodic (or no
// policy). OnChange syncs on every metadata change whatever the interval.
import { describe, expect, it } from 'vitest';
import { forceSyncOff, goDurationMs } from '../../../src/consumers/kinds/external-secret-refresh.ts';

describe('refresh settings that switch force-sync off', () => {
  it('reads Go durations as metav1.Duration writes them', () => {
    expect(goDurationMs('1h')).toBe(3_600_000);
    expect(goDurationMs('1h0m0s')).toBe(3_600_000);
    expect(goDurationMs('2h30m')).toBe(9_000_000);
    expect(goDurationMs('1.5s')).toBe(1_500);
    expect(goDurationMs('0')).toBe(0);
    expect(goDurationMs('0s')).toBe(0);
    expect(goDurationMs('-1m')).toBe(-60_000);
    expect(goDurationMs('5d')).toBeUndefined();
    expect(goDurationMs('')).toBeUndefined();
  });

  it.each([
    ['refreshInterval 0', { refreshInterval: '0' }, 'refreshInterval is 0'],
    ['refreshInterval 0s', { refreshInterval: '0s' }, 'refreshInterval is 0s'],
    [
      'refreshInterval 0 under Periodic',
      { refreshPolicy: 'Periodic', refreshInterval: '0s' },
      'refreshInterval is 0s',
    ],
    ['refreshPolicy CreatedOnce', { refreshPolicy: 'CreatedOnce', refreshInterval: '1h' }, 'CreatedOnce'],
  ])('%s: KR_CONSUMER_FORCE_SYNC_OFF naming the cause and the fix', (_name, spec, cause) => {
    const error = forceSyncOff({ spec });
    expect(error?.code).toBe('KR_CONSUMER_FORCE_SYNC_OFF');
    expect(error?.message).toContain(cause);
    expect(error?.message).toMatch(/refreshPolicy: OnChange/);
  });

  it.each([
    ['the default (1h)', { refreshInterval: '1h' }],
    ['no interval (the CRD defaults it)', {}],
    ['OnChange with interval 0', { refreshPolicy: 'OnChange', refreshInterval: '0' }],
    ['Periodic every 15 minutes', { refreshPolicy: 'Periodic', refreshInterval: '15m' }],
  ])('%s: force-sync works', (_name, spec) => {
    expect(forceSyncOff({ spec })).toBeUndefined();
  });
});
