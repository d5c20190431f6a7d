// Two-slot entries (issue 15, invariant 10): what a slot entry resolves to, the drift settings
// every key has, each refusal as one exact `file:line path: sentence`, and the lookup that lets
// an operator name an entry or one of its slots.
import { describe, expect, it } from 'vitest';
import { findKeyEntry } from '../../src/policy/key-entry.ts';
import { parsePolicy } from '../../src/policy/load.ts';
import { smallestScheduleGap } from '../../src/policy/slots.ts';
import { policyRejection } from '../support/policy-rejection.ts';

const HOUR = 3_600_000;

// Lines 1-7; the first entry starts at line 8.
const HEAD = `version: 1
api:
  baseUrl: http://127.0.0.1:8787
  credential: { type: bearer, token: env:KEYROLL_API_TOKEN }
backends:
  files: { kind: file, directory: ./secrets }
keys:
`;

/** An entry of 3 lines (id, organization, destinations) followed by `extra`, one per line. */
function entry(id: string, extra: string[]): string {
  return `  - id: ${id}\n    organization: org_a\n    destinations: [{ backend: files, path: ${id}.json }]\n${extra.map((line) => `    ${line}\n`).join('')}`;
}

const SLOT_ENTRY = ['slots: [key_a, key_b]', 'consumerRefresh: 1h', 'maxAge: 7d'];

const messageOf = (text: string): string => policyRejection(text).message;

describe('resolving slot entries and drift settings', () => {
  it('a slot entry resolves to its two slots, consumerRefreshMs and the drift defaults', () => {
    const [key] = parsePolicy(`${HEAD}${entry('billing-api', SLOT_ENTRY)}`, 'policy.yaml').keys;
    expect(key).toMatchObject({
      id: 'billing-api',
      organizationId: 'org_a',
      slots: ['key_a', 'key_b'],
      consumerRefreshMs: HOUR,
      driftCheckMs: HOUR,
      onDrift: 'rotate',
      maxAgeMs: 7 * 24 * HOUR,
    });
  });

  it('a single key has no slots and no consumerRefreshMs, and gets the drift defaults', () => {
    const [key] = parsePolicy(`${HEAD}${entry('key_a', ['maxAge: 7d'])}`, 'policy.yaml').keys;
    expect(key).toBeDefined();
    expect(Object.keys(key ?? {})).not.toContain('slots');
    expect(Object.keys(key ?? {})).not.toContain('consumerRefreshMs');
    expect(key).toMatchObject({ driftCheckMs: HOUR, onDrift: 'rotate' });
  });

  it('driftCheck and onDrift come from defaults, a key overrides them, and driftCheck: null switches the check off', () => {
    const text = HEAD.replace(
      'keys:\n',
      'defaults:\n  maxAge: 7d\n  driftCheck: 15m\n  onDrift: alert\nkeys:\n',
    );
    const policy = parsePolicy(
      `${text}${entry('key_a', [])}${entry('key_b', ['driftCheck: 2h', 'onDrift: rotate'])}${entry('key_c', ['driftCheck: null'])}`,
      'policy.yaml',
    );
    const [a, b, c] = policy.keys;
    expect(a).toMatchObject({ driftCheckMs: 15 * 60_000, onDrift: 'alert' });
    expect(b).toMatchObject({ driftCheckMs: 2 * HOUR, onDrift: 'rotate' });
    expect(c).toMatchObject({ onDrift: 'alert' });
    expect(Object.keys(c ?? {})).not.toContain('driftCheckMs');
  });
});

describe('refusals', () => {
  it('an onDrift that is neither rotate nor alert', () => {
    expect(messageOf(`${HEAD}${entry('key_a', ['maxAge: 7d', 'onDrift: ignore'])}`)).toBe(
      'policy.yaml:12 keys[0].onDrift: must be one of rotate, alert',
    );
  });

  it('consumerRefresh on a single key', () => {
    expect(messageOf(`${HEAD}${entry('key_a', ['maxAge: 7d', 'consumerRefresh: 1h'])}`)).toBe(
      'policy.yaml:12 keys[0].consumerRefresh: applies only to slot entries (an entry with slots: [KEY_A, KEY_B]); add slots or remove consumerRefresh',
    );
  });

  it('slots without consumerRefresh', () => {
    expect(messageOf(`${HEAD}${entry('billing-api', ['slots: [key_a, key_b]', 'maxAge: 7d'])}`)).toBe(
      'policy.yaml:8 keys[0].consumerRefresh: is required with slots: the longest time a consumer may keep using a value it read (e.g. 1h)',
    );
  });

  it('slots that are not exactly two', () => {
    expect(
      messageOf(`${HEAD}${entry('billing-api', ['slots: [key_a]', 'consumerRefresh: 1h', 'maxAge: 7d'])}`),
    ).toBe('policy.yaml:11 keys[0].slots: must list exactly two API key ids');
    expect(
      messageOf(
        `${HEAD}${entry('billing-api', ['slots: [key_a, key_b, key_c]', 'consumerRefresh: 1h', 'maxAge: 7d'])}`,
      ),
    ).toBe('policy.yaml:11 keys[0].slots: must list exactly two API key ids');
  });

  it('one API key as both slots', () => {
    expect(
      messageOf(
        `${HEAD}${entry('billing-api', ['slots: [key_a, key_a]', 'consumerRefresh: 1h', 'maxAge: 7d'])}`,
      ),
    ).toBe(
      'policy.yaml:11 keys[0].slots[1]: "key_a" is also slots[0]; the two slots must be two different API keys',
    );
  });

  it('a slot of two entries', () => {
    const text = `${HEAD}${entry('billing-api', SLOT_ENTRY)}${entry('search-api', ['slots: [key_c, key_b]', 'consumerRefresh: 1h', 'maxAge: 7d'])}`;
    expect(messageOf(text)).toBe(
      'policy.yaml:17 keys[1].slots[1]: "key_b" is already a slot of keys[0] (billing-api); an API key may belong to one entry only',
    );
  });

  it('a slot that is also a single key, whichever comes first', () => {
    expect(messageOf(`${HEAD}${entry('key_b', ['maxAge: 7d'])}${entry('billing-api', SLOT_ENTRY)}`)).toBe(
      'policy.yaml:15 keys[1].slots[1]: "key_b" is also the single key keys[0]; an API key may belong to one entry only',
    );
    expect(messageOf(`${HEAD}${entry('billing-api', SLOT_ENTRY)}${entry('key_a', ['maxAge: 7d'])}`)).toBe(
      'policy.yaml:11 keys[0].slots[0]: "key_a" is also the single key keys[1]; an API key may belong to one entry only',
    );
  });

  it('a slot that is the id of a slot entry, its own or another', () => {
    expect(messageOf(`${HEAD}${entry('key_a', SLOT_ENTRY)}`)).toBe(
      'policy.yaml:11 keys[0].slots[0]: "key_a" is also this entry\'s id; a slot entry\'s id names the entry and must not be one of its API key ids',
    );
    const text = `${HEAD}${entry('billing-api', SLOT_ENTRY)}${entry('search-api', ['slots: [key_c, billing-api]', 'consumerRefresh: 1h', 'maxAge: 7d'])}`;
    expect(messageOf(text)).toBe(
      'policy.yaml:17 keys[1].slots[1]: "billing-api" is the id of the slot entry keys[0]; a slot entry\'s id names the entry and must not be an API key id',
    );
  });

  it('a minInterval shorter than consumerRefresh, also when it is the built-in default', () => {
    expect(
      messageOf(
        `${HEAD}${entry('billing-api', ['slots: [key_a, key_b]', 'consumerRefresh: 2h', 'maxAge: 7d'])}`,
      ),
    ).toBe(
      'policy.yaml:12 keys[0].consumerRefresh: minInterval (1h, the built-in default) is shorter than consumerRefresh (2h), so a slot could be rolled while consumers may still use its value; set minInterval to at least consumerRefresh',
    );
    expect(
      messageOf(
        `${HEAD}${entry('billing-api', ['slots: [key_a, key_b]', 'consumerRefresh: 2h', 'maxAge: 7d', 'minInterval: 90m'])}`,
      ),
    ).toBe(
      'policy.yaml:14 keys[0].minInterval: minInterval (1h30m) is shorter than consumerRefresh (2h), so a slot could be rolled while consumers may still use its value; set minInterval to at least consumerRefresh',
    );
  });

  it('a maxAge shorter than consumerRefresh', () => {
    const error = policyRejection(
      `${HEAD}${entry('billing-api', ['slots: [key_a, key_b]', 'consumerRefresh: 2h', 'maxAge: 90m', 'minInterval: 1h'])}`,
    );
    expect(error.issues.map((issue) => `${issue.line} ${issue.path}: ${issue.message}`)).toContain(
      '13 keys[0].maxAge: maxAge (1h30m) is shorter than consumerRefresh (2h), so a slot could be rolled while consumers may still use its value; raise maxAge or lower consumerRefresh',
    );
  });

  it('a schedule with two fires closer than consumerRefresh', () => {
    expect(
      messageOf(
        `${HEAD}${entry('billing-api', ['slots: [key_a, key_b]', 'consumerRefresh: 2h', 'minInterval: 2h', 'schedule: "0 * * * *"'])}`,
      ),
    ).toMatch(
      /^policy\.yaml:14 keys\[0\]\.schedule: schedule "0 \* \* \* \*" fires 1h apart at \d{4}-\d\d-\d\dT\d\d:00:00\.000Z \(UTC\), less than consumerRefresh \(2h\), so a slot could be rolled while consumers may still use its value; choose a schedule whose fires are at least consumerRefresh apart$/,
    );
  });

  it('a daily schedule is refused for consumerRefresh 24h in a zone with DST (one day has 23h) and accepted in UTC', () => {
    const daily = (zone: string): string =>
      `${HEAD}${entry('billing-api', ['slots: [key_a, key_b]', 'consumerRefresh: 24h', 'minInterval: 24h', 'schedule: "0 3 * * *"', `timezone: ${zone}`])}`;
    expect(messageOf(daily('Europe/Berlin'))).toMatch(
      /keys\[0\]\.schedule: schedule "0 3 \* \* \*" fires 23h apart at .* \(Europe\/Berlin\), less than consumerRefresh \(1d\)/,
    );
    expect(parsePolicy(daily('UTC'), 'policy.yaml').keys[0]?.consumerRefreshMs).toBe(24 * HOUR);
  });

  it('a schedule, maxAge and minInterval at least consumerRefresh are accepted', () => {
    const policy = parsePolicy(
      `${HEAD}${entry('billing-api', ['slots: [key_a, key_b]', 'consumerRefresh: 1h', 'schedule: "0 */6 * * *"', 'maxAge: 1h'])}`,
      'policy.yaml',
    );
    expect(policy.keys[0]).toMatchObject({
      slots: ['key_a', 'key_b'],
      schedule: '0 */6 * * *',
      maxAgeMs: HOUR,
      minIntervalMs: HOUR,
    });
  });
});

describe('smallestScheduleGap', () => {
  it('measures real time between fires, so the spring DST change shortens a daily gap to 23h', () => {
    const gap = smallestScheduleGap('0 3 * * *', 'Europe/Berlin', new Date('2026-01-01T00:00:00Z'));
    expect(gap?.ms).toBe(23 * HOUR);
    expect(gap?.after.toISOString()).toBe('2026-03-28T02:00:00.000Z');
  });

  it('finds the short gap of an irregular schedule', () => {
    expect(smallestScheduleGap('0 9,10 * * 1', 'UTC', new Date('2026-01-01T00:00:00Z'))?.ms).toBe(HOUR);
  });
});

describe('findKeyEntry', () => {
  const policy = parsePolicy(
    `${HEAD}${entry('billing-api', SLOT_ENTRY)}${entry('key_c', ['maxAge: 7d'])}`,
    'policy.yaml',
  );

  it('finds a single key by its id', () => {
    expect(findKeyEntry(policy, 'key_c')).toEqual({ key: policy.keys[1] });
  });

  it('finds a slot entry by its id, without naming a slot', () => {
    expect(findKeyEntry(policy, 'billing-api')).toEqual({ key: policy.keys[0] });
  });

  it('finds a slot entry by either slot and says which', () => {
    expect(findKeyEntry(policy, 'key_a')).toEqual({ key: policy.keys[0], slot: 'key_a' });
    expect(findKeyEntry(policy, 'key_b')).toEqual({ key: policy.keys[0], slot: 'key_b' });
  });

  it('answers undefined for an id the policy does not name', () => {
    expect(findKeyEntry(policy, 'key_z')).toBeUndefined();
  });
});
