// The trigger's request body (src/scheduler/trigger-request.ts): exactly one of keys, org or all,
// and which keys it selects.
import { describe, expect, it } from 'vitest';
import { selectTriggerKeys, TriggerRequest } from '../../src/scheduler/trigger-request.ts';
import { keyPolicy } from '../rotation/harness.ts';

describe('trigger request', () => {
  const keys = [keyPolicy('k1', 'org_a'), keyPolicy('k2', 'org_b'), keyPolicy('k3', 'org_a')];
  const parse = (body: unknown): TriggerRequest => TriggerRequest.parse(body);

  it('needs exactly one of keys, org or all', () => {
    expect(TriggerRequest.safeParse({ reason: 'leak', actor: 'a' }).success).toBe(false);
    expect(TriggerRequest.safeParse({ keys: ['k1'], org: 'org_a', reason: 'leak', actor: 'a' }).success).toBe(
      false,
    );
    expect(TriggerRequest.safeParse({ all: false, reason: 'leak', actor: 'a' }).success).toBe(false);
    expect(TriggerRequest.safeParse({ all: true, reason: 'scheduled', actor: 'a' }).success).toBe(false);
  });

  it('keeps named keys in the order given, once each', () => {
    expect(selectTriggerKeys(keys, parse({ keys: ['k3', 'k1', 'k3'], reason: 'leak', actor: 'a' }))).toEqual({
      ok: true,
      keys: [keys[2], keys[0]],
    });
  });

  it('selects an organization or everything in policy order, and names what is unknown', () => {
    expect(selectTriggerKeys(keys, parse({ org: 'org_a', reason: 'leak', actor: 'a' }))).toEqual({
      ok: true,
      keys: [keys[0], keys[2]],
    });
    expect(selectTriggerKeys(keys, parse({ all: true, reason: 'manual', actor: 'a' }))).toEqual({
      ok: true,
      keys,
    });
    expect(selectTriggerKeys(keys, parse({ org: 'org_x', reason: 'leak', actor: 'a' }))).toMatchObject({
      ok: false,
      why: 'unknown-org',
      unknown: ['org_x'],
    });
    expect(
      selectTriggerKeys(keys, parse({ keys: ['k1', 'nope'], reason: 'leak', actor: 'a' })),
    ).toMatchObject({ ok: false, why: 'unknown-keys', unknown: ['nope'] });
  });

  it('takes a slot of a two-slot entry as that entry, with the slot to roll (a leaked standby)', () => {
    const entry = keyPolicy('billing-api', 'org_a', {
      slots: ['slot_a', 'slot_b'],
      consumerRefreshMs: 3600_000,
    });
    const withSlots = [...keys, entry];
    expect(
      selectTriggerKeys(withSlots, parse({ keys: ['slot_b', 'k1'], reason: 'leak', actor: 'a' })),
    ).toEqual({ ok: true, keys: [entry, keys[0]], slots: new Map([['billing-api', 'slot_b']]) });
    expect(
      selectTriggerKeys(withSlots, parse({ keys: ['billing-api'], reason: 'leak', actor: 'a' })),
    ).toEqual({ ok: true, keys: [entry] });
  });
});
