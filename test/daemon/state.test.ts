import { describe, expect, it } from 'vitest';
import { DaemonState } from '../../src/daemon/state.ts';
import type { CheckedReadiness } from '../../src/scheduler/readiness.ts';

interface FakeGeneration {
  name: string;
}

const first: FakeGeneration = { name: 'first' };
const second: FakeGeneration = { name: 'second' };
const READY: CheckedReadiness = { state: 'ready', checkedAt: '2026-11-29T08:00:00.000Z', destinations: 1 };

function serving(): DaemonState<FakeGeneration, string, number> {
  const state = new DaemonState<FakeGeneration, string, number>({ generation: first, secrets: 'first' });
  state.serve();
  return state;
}

describe('the daemon state', () => {
  it('starts not ready, serves once, and keeps readiness starting until the first check answers', () => {
    const state = new DaemonState<FakeGeneration, string, number>({ generation: first, secrets: 'first' });
    expect(state.current.phase).toBe('starting');
    expect(state.readiness()).toEqual({ state: 'starting' });
    expect(state.serve()).toBe(true);
    expect(state.serve()).toBe(false);
    expect(state.readiness()).toEqual({ state: 'starting' });
    expect(state.checked(first, READY)).toBe(true);
    expect(state.readiness()).toEqual(READY);
  });

  it('swaps the policy on a reload and keeps the previous readiness until the new one is checked', () => {
    const state = serving();
    state.checked(first, READY);
    expect(state.beginReload()).toBe(true);
    expect(state.current.phase).toBe('reloading');
    // Only one reload at a time: the daemon queues them.
    expect(state.beginReload()).toBe(false);
    expect(state.endReload({ generation: second, secrets: 'second' })).toBe(true);
    expect(state.current).toMatchObject({ phase: 'serving', generation: second, secrets: 'second' });
    expect(state.readiness()).toEqual(READY);
    expect(state.isCurrent(first)).toBe(false);
    // A check of the replaced policy that answers late is dropped.
    expect(state.checked(first, { ...READY, destinations: 9 })).toBe(false);
    expect(state.readiness()).toEqual(READY);
  });

  it('a failed reload keeps the policy in force', () => {
    const state = serving();
    state.beginReload();
    expect(state.endReload()).toBe(true);
    expect(state.current).toMatchObject({ phase: 'serving', generation: first, secrets: 'first' });
  });

  it('refuses a reload once a shutdown began, and a reload that was loading never takes over', async () => {
    const stopped = serving();
    const result = stopped.shutDown(() => Promise.resolve(0));
    expect(stopped.beginReload()).toBe(false);
    expect(stopped.current.phase).toBe('shutting-down');
    await expect(result).resolves.toBe(0);

    const loading = serving();
    loading.beginReload();
    void loading.shutDown(() => Promise.resolve(0));
    expect(loading.endReload({ generation: second, secrets: 'second' })).toBe(false);
    expect(loading.current).toMatchObject({ phase: 'shutting-down', generation: first, secrets: 'first' });
  });

  it('shuts down once: the phase says so before the shutdown work runs, and a second call answers the first', async () => {
    const state = serving();
    state.checked(first, READY);
    const seen: string[] = [];
    const once = state.shutDown(() => {
      seen.push(state.current.phase);
      return Promise.resolve(3);
    });
    const again = state.shutDown(() => Promise.resolve(0));
    expect(seen).toEqual(['shutting-down']);
    expect(again).toBe(once);
    await expect(again).resolves.toBe(3);
    expect(state.accepting()).toBe(false);
    expect(state.isCurrent(first)).toBe(false);
    expect(state.readiness()).toEqual({ state: 'shutting-down' });
    // Never "shutting down but ready": a check that answers after the shutdown began is dropped.
    expect(state.checked(first, READY)).toBe(false);
    expect(state.readiness()).toEqual({ state: 'shutting-down' });
    expect(state.serve()).toBe(false);
  });
});
