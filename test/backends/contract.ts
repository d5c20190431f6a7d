// The backend contract: one suite every backend runs (file always; OpenBao and moto as real
// servers), so the rotation engine can rely on the same behaviour whichever backend a key uses.
// Each backend's test file calls `describeBackendContract` with a setup that builds the backend
// with a controllable clock (BackendDeps.now), so lock expiry is tested without sleeping.
import { inspect } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import { BackendError } from '../../src/backends/errors.ts';
import type {
  Backend,
  FailureRecord,
  HeldLock,
  Intent,
  SecretRecord,
  StoreTarget,
  ValueShape,
} from '../../src/backends/types.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

/** A clock the test moves by hand; pass `clock.now` as BackendDeps.now. */
export interface TestClock {
  now: () => Date;
  advance(ms: number): void;
}

export function createTestClock(start = new Date('2030-01-01T00:00:00.000Z')): TestClock {
  let current = start.getTime();
  return {
    now: () => new Date(current),
    advance: (ms) => {
      current += ms;
    },
  };
}

export interface ContractFixture {
  backend: Backend;
  /** A fresh target no other test uses; raw shape unless overridden. */
  newTarget(shape?: Partial<ValueShape>): StoreTarget;
  /** The clock the backend was built with. */
  clock: TestClock;
  /**
   * A second backend instance on the same store and clock, as another runner (another process)
   * would build it: no knowledge shared with `backend` (invariant 9's two-runner cases).
   */
  otherRunner(): Promise<Backend>;
  /** A target whose write must fail (default: an empty path). */
  failingTarget?(): StoreTarget;
  cleanup(): Promise<void>;
}

let counter = 0;

/** A record with a unique, recognisable secret (long enough for the sanitizer to track). */
export function makeRecord(
  overrides: Partial<Omit<SecretRecord, 'secret'>> & { secret?: string } = {},
): SecretRecord {
  counter += 1;
  const rotationId = overrides.rotationId ?? `rot-${String(Date.now())}-${String(counter)}`;
  return {
    secret: new Secret(
      overrides.secret ?? `sk_live_contract_${rotationId}_${Math.random().toString(36).slice(2)}`,
    ),
    keyId: overrides.keyId ?? 'key_contract',
    organizationId: overrides.organizationId ?? 'org_contract',
    rotationId,
    rotatedAt: overrides.rotatedAt ?? '2030-01-01T00:00:00.000Z',
  };
}

function makeIntent(rotationId: string, extra: Partial<Intent> = {}): Intent {
  return {
    rotationId,
    keyId: 'key_contract',
    owner: 'host/1/contract',
    startedAt: '2030-01-01T00:00:00.000Z',
    ...extra,
  };
}

export function describeBackendContract(label: string, setup: () => Promise<ContractFixture>): void {
  describe(`backend contract: ${label}`, () => {
    let fixture: ContractFixture;
    // Getters keep each test short and fail loudly if setup itself failed.
    const backend = (): Backend => fixture.backend;
    const target = (shape?: Partial<ValueShape>): StoreTarget => fixture.newTarget(shape);

    beforeAll(async () => {
      fixture = await setup();
    });
    afterAll(async () => {
      // `fixture` is unset when setup threw; the setup error is the one to report.
      // eslint-disable-next-line @typescript-eslint/no-unnecessary-condition
      if (fixture !== undefined) {
        await fixture.backend.close();
        await fixture.cleanup();
      }
    });

    describe('preflight', () => {
      it('passes on a missing target and reports exists: false', async () => {
        const result = await backend().preflight(target());
        expect(result.exists).toBe(false);
        expect(result.checks.length).toBeGreaterThan(0);
      });

      it('passes on an existing target and reports exists: true', async () => {
        const t = target();
        await backend().writeSecret(t, makeRecord());
        const result = await backend().preflight(t);
        expect(result.exists).toBe(true);
      });

      it('does not change the stored secret or its version', async () => {
        const t = target();
        const record = makeRecord();
        await backend().writeSecret(t, record);
        const before = await backend().readSecret(t);
        await backend().preflight(t);
        const after = await backend().readSecret(t);
        expect(after?.secret.equals(record.secret)).toBe(true);
        expect(after?.version).toBe(before?.version);
      });
    });

    describe('write and read', () => {
      it('reads nothing from a missing target', async () => {
        expect(await backend().readSecret(target())).toBeUndefined();
      });

      it('round-trips a raw value', async () => {
        const t = target({ format: 'raw' });
        const record = makeRecord();
        const written = await backend().writeSecret(t, record);
        expect(written.alreadyApplied).toBe(false);
        expect(written.version).not.toBe('');
        const stored = await backend().readSecret(t);
        expect(stored?.secret.equals(record.secret)).toBe(true);
        expect(stored?.version).toBe(written.version);
      });

      it('round-trips a json value with fields', async () => {
        const t = target({
          format: 'json',
          secretField: 'apiKey',
          fields: ['keyId', 'organizationId', 'rotatedAt', 'rotationId'],
        });
        const record = makeRecord();
        await backend().writeSecret(t, record);
        const stored = await backend().readSecret(t);
        expect(stored?.secret.equals(record.secret)).toBe(true);
        expect(stored?.rotationId).toBe(record.rotationId);
      });

      it('reads back a value whose digest matches the written secret', async () => {
        const t = target();
        const record = makeRecord();
        await backend().writeSecret(t, record);
        const stored = await backend().readSecret(t);
        expect(stored?.secret.digest()).toBe(record.secret.digest());
      });

      it('treats a retried write of the same rotation as already applied, with no second version', async () => {
        const t = target();
        const record = makeRecord();
        const first = await backend().writeSecret(t, record);
        const retry = await backend().writeSecret(t, record);
        expect(retry).toEqual({ version: first.version, alreadyApplied: true });
        expect((await backend().readSecret(t))?.version).toBe(first.version);
      });

      it('treats a retried json write of the same rotation as already applied', async () => {
        const t = target({ format: 'json', fields: ['rotationId'] });
        const record = makeRecord();
        const first = await backend().writeSecret(t, record);
        const retry = await backend().writeSecret(t, record);
        expect(retry).toEqual({ version: first.version, alreadyApplied: true });
      });

      it('writes a new version for a different rotation', async () => {
        const t = target();
        const first = await backend().writeSecret(t, makeRecord());
        const next = makeRecord();
        const second = await backend().writeSecret(t, next);
        expect(second.alreadyApplied).toBe(false);
        expect(second.version).not.toBe(first.version);
        const stored = await backend().readSecret(t);
        expect(stored?.secret.equals(next.secret)).toBe(true);
        expect(stored?.version).toBe(second.version);
      });

      it('creates the target on the first write after preflight said it was missing', async () => {
        const t = target();
        expect((await backend().preflight(t)).exists).toBe(false);
        await backend().writeSecret(t, makeRecord());
        expect((await backend().readState(t)).exists).toBe(true);
      });
    });

    describe('lock', () => {
      const request = (owner: string, ttlMs = 60_000) => ({ owner, rotationId: `rot-${owner}`, ttlMs });

      it('is acquired on a free target, busy for another owner, free again after release', async () => {
        const t = target();
        const first = await backend().acquireLock(t, request('owner-a'));
        if (!first.acquired) throw new Error('expected the lock to be acquired');
        expect(first.lock.owner).toBe('owner-a');
        expect(first.lock.tookOver).toBe(false);

        const busy = await backend().acquireLock(t, request('owner-b'));
        expect(busy).toMatchObject({
          acquired: false,
          holder: { owner: 'owner-a', rotationId: 'rot-owner-a' },
        });

        await backend().releaseLock(t, first.lock);
        const again = await backend().acquireLock(t, request('owner-b'));
        expect(again.acquired).toBe(true);
      });

      it('can be acquired on a target that does not exist yet (first rotation)', async () => {
        const t = target();
        const outcome = await backend().acquireLock(t, request('owner-a'));
        expect(outcome.acquired).toBe(true);
        expect(await backend().readSecret(t)).toBeUndefined();
      });

      it('is acquired again by the same owner and rotation (a retried call)', async () => {
        const t = target();
        expect((await backend().acquireLock(t, request('owner-a'))).acquired).toBe(true);
        expect((await backend().acquireLock(t, request('owner-a'))).acquired).toBe(true);
      });

      it('is shown by readState while held and gone after release', async () => {
        const t = target();
        const outcome = await backend().acquireLock(t, request('owner-a'));
        if (!outcome.acquired) throw new Error('expected the lock to be acquired');
        expect((await backend().readState(t)).lock).toMatchObject({
          owner: 'owner-a',
          rotationId: 'rot-owner-a',
        });
        await backend().releaseLock(t, outcome.lock);
        expect((await backend().readState(t)).lock).toBeUndefined();
      });

      it('is taken over only after its TTL has passed', async () => {
        const t = target();
        expect((await backend().acquireLock(t, request('owner-a', 60_000))).acquired).toBe(true);
        fixture.clock.advance(59_000);
        expect((await backend().acquireLock(t, request('owner-b'))).acquired).toBe(false);
        fixture.clock.advance(2_000);
        const taken = await backend().acquireLock(t, request('owner-b'));
        if (!taken.acquired) throw new Error('expected the stale lock to be taken over');
        expect(taken.lock).toMatchObject({ owner: 'owner-b', tookOver: true });
      });

      it('is not released by a former holder whose lock was taken over', async () => {
        const t = target();
        const a = await backend().acquireLock(t, request('owner-a', 1_000));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        fixture.clock.advance(2_000);
        expect((await backend().acquireLock(t, request('owner-b'))).acquired).toBe(true);
        await backend().releaseLock(t, a.lock);
        expect(await backend().acquireLock(t, request('owner-c'))).toMatchObject({
          acquired: false,
          holder: { owner: 'owner-b' },
        });
      });

      it('goes to exactly one of two owners racing for it', async () => {
        const t = target();
        const outcomes = await Promise.all([
          backend().acquireLock(t, request('owner-a')),
          backend().acquireLock(t, request('owner-b')),
        ]);
        expect(outcomes.filter((o) => o.acquired)).toHaveLength(1);
      });

      it('refreshLock extends a held lock, so it outlives its first expiry', async () => {
        const t = target();
        const a = await backend().acquireLock(t, request('owner-a', 10_000));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        fixture.clock.advance(8_000);
        const refreshed = await backend().refreshLock(t, a.lock, 10_000);
        expect(refreshed).toMatchObject({ owner: 'owner-a', rotationId: 'rot-owner-a' });
        fixture.clock.advance(8_000);
        expect((await backend().acquireLock(t, request('owner-b'))).acquired).toBe(false);
        if (!refreshed) throw new Error('expected a refreshed lock');
        expect(await backend().refreshLock(t, refreshed, 10_000)).toBeDefined();
      });

      it('refreshLock reports a lock taken over by another runner as lost, and leaves the new holder alone', async () => {
        const t = target();
        const a = await backend().acquireLock(t, request('owner-a', 1_000));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        fixture.clock.advance(2_000);
        const other = await fixture.otherRunner();
        try {
          const b = await other.acquireLock(t, request('owner-b'));
          expect(b.acquired).toBe(true);
          expect(await backend().refreshLock(t, a.lock, 60_000)).toBeUndefined();
          expect(await backend().acquireLock(t, request('owner-c'))).toMatchObject({
            acquired: false,
            holder: { owner: 'owner-b' },
          });
        } finally {
          await other.close();
        }
      });

      it('refreshLock never creates a lock that was released', async () => {
        const t = target();
        const a = await backend().acquireLock(t, request('owner-a'));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        await backend().releaseLock(t, a.lock);
        expect(await backend().refreshLock(t, a.lock, 60_000)).toBeUndefined();
        expect((await backend().readState(t)).lock).toBeUndefined();
      });

      it('is taken over only once its expiry lies clockSkewMs in the past', async () => {
        const t = target();
        expect((await backend().acquireLock(t, request('owner-a', 10_000))).acquired).toBe(true);
        fixture.clock.advance(20_000);
        expect(
          (await backend().acquireLock(t, { ...request('owner-b'), clockSkewMs: 30_000 })).acquired,
        ).toBe(false);
        fixture.clock.advance(21_000);
        const taken = await backend().acquireLock(t, { ...request('owner-b'), clockSkewMs: 30_000 });
        expect(taken).toMatchObject({ acquired: true, lock: { owner: 'owner-b', tookOver: true } });
      });

      // Issue 30: a holder proven dead (its pod gone, its container replaced) is not waited for.
      it('is taken over at once, before its TTL, from an owner the request names as dead, as a stale one is', async () => {
        for (const stored of [false, true]) {
          const t = target();
          // With and without a value: the AWS backend keeps the lock of a secret with no value elsewhere.
          if (stored) await backend().writeSecret(t, makeRecord());
          const a = await backend().acquireLock(t, request('owner-a', 600_000));
          if (!a.acquired) throw new Error('expected the lock to be acquired');
          const other = await fixture.otherRunner();
          try {
            const taken = await other.acquireLock(t, { ...request('owner-b'), deadOwners: ['owner-a'] });
            expect(taken, `stored: ${String(stored)}`).toMatchObject({
              acquired: true,
              lock: { owner: 'owner-b', tookOver: true },
            });
            // The dead holder's lock is gone: it could neither refresh it nor release the new one.
            expect(await backend().refreshLock(t, a.lock, 600_000)).toBeUndefined();
            await backend().releaseLock(t, a.lock);
            expect(await backend().acquireLock(t, request('owner-c'))).toMatchObject({
              acquired: false,
              holder: { owner: 'owner-b' },
            });
          } finally {
            await other.close();
          }
        }
      });

      it('is not taken over before its TTL when the dead owners named are not its holder', async () => {
        const t = target();
        expect((await backend().acquireLock(t, request('owner-a', 600_000))).acquired).toBe(true);
        const busy = await backend().acquireLock(t, {
          ...request('owner-b'),
          deadOwners: ['owner-x', 'owner-a-but-not-quite'],
        });
        expect(busy).toMatchObject({ acquired: false, holder: { owner: 'owner-a' } });
        expect(await backend().acquireLock(t, { ...request('owner-b'), deadOwners: [] })).toMatchObject({
          acquired: false,
        });
      });

      it('tolerates the release of a lock that is already gone', async () => {
        const t = target();
        const outcome = await backend().acquireLock(t, request('owner-a'));
        if (!outcome.acquired) throw new Error('expected the lock to be acquired');
        await backend().releaseLock(t, outcome.lock);
        await expect(backend().releaseLock(t, outcome.lock)).resolves.toBeUndefined();
      });
    });

    describe('fenced writes (invariant 9)', () => {
      const request = (owner: string, ttlMs = 60_000) => ({ owner, rotationId: `rot-${owner}`, ttlMs });

      it('lands while the writer holds the lock', async () => {
        const t = target();
        await backend().preflight(t);
        const a = await backend().acquireLock(t, request('owner-a'));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        await backend().readState(t);
        const record = makeRecord();
        const written = await backend().writeSecret(t, record, { lock: a.lock });
        expect(written.alreadyApplied).toBe(false);
        expect((await backend().readSecret(t))?.secret.equals(record.secret)).toBe(true);
        await backend().releaseLock(t, a.lock);
      });

      /**
       * Runner A (this fixture's backend) holds the lock of a stored target (TTL 1 s) and read its
       * state; the clock passes the lock, and runner B (another instance) takes it over the way the
       * engine does (preflight, lock, state), writing nothing yet. `body` gets both; B is closed after.
       */
      async function takenOver(
        body: (t: StoreTarget, a: HeldLock, other: Backend, b: HeldLock) => Promise<void>,
      ): Promise<void> {
        const t = target();
        await backend().writeSecret(t, makeRecord());
        await backend().preflight(t);
        const a = await backend().acquireLock(t, request('owner-a', 1_000));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        await backend().readState(t);
        fixture.clock.advance(2_000);
        const other = await fixture.otherRunner();
        try {
          await other.preflight(t);
          const b = await other.acquireLock(t, request('owner-b'));
          if (!b.acquired) throw new Error('expected the takeover');
          await other.readState(t);
          await body(t, a.lock, other, b.lock);
          await other.releaseLock(t, b.lock);
        } finally {
          await other.close();
        }
      }

      it("is refused for a runner whose lock was taken over, and the new holder's secret stays", async () => {
        await takenOver(async (t, a, other, b) => {
          const winner = makeRecord();
          await other.writeSecret(t, winner, { lock: b });
          const late = makeRecord();
          await expect(backend().writeSecret(t, late, { lock: a })).rejects.toMatchObject({
            code: 'KR_LOCK_LOST',
            retryable: false,
          });
          // A retry of the refused write is refused too: the fence is not forgotten after one refusal.
          await expect(backend().writeSecret(t, late, { lock: a })).rejects.toMatchObject({
            code: 'KR_LOCK_LOST',
          });
          const stored = await other.readSecret(t);
          expect(stored?.secret.equals(winner.secret)).toBe(true);
          expectNoSecrets([inspect(await other.readState(t))], [late.secret.reveal()]);
        });
      });

      it("is refused for a runner whose lock was taken over even when it writes before the new holder, and the new holder's write lands after it", async () => {
        await takenOver(async (t, a, other, b) => {
          // The old holder resumes first: its write must not land, whatever it read under its lock.
          const late = makeRecord();
          await expect(backend().writeSecret(t, late, { lock: a })).rejects.toMatchObject({
            code: 'KR_LOCK_LOST',
            retryable: false,
          });
          // The new holder's lease is valid: its write lands (it never loses it to the old holder).
          const winner = makeRecord();
          await expect(other.writeSecret(t, winner, { lock: b })).resolves.toMatchObject({
            alreadyApplied: false,
          });
          expect((await other.readSecret(t))?.secret.equals(winner.secret)).toBe(true);
          expectNoSecrets([inspect(await other.readState(t))], [late.secret.reveal()]);
        });
      });

      it("is refused for a runner whose lock was taken over as proven dead before its TTL, and the new holder's secret stays", async () => {
        const t = target();
        await backend().writeSecret(t, makeRecord());
        await backend().preflight(t);
        const a = await backend().acquireLock(t, request('owner-a', 600_000));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        await backend().readState(t);
        const other = await fixture.otherRunner();
        try {
          await other.preflight(t);
          const b = await other.acquireLock(t, { ...request('owner-b'), deadOwners: ['owner-a'] });
          if (!b.acquired) throw new Error('expected the takeover');
          await other.readState(t);
          const winner = makeRecord();
          await expect(other.writeSecret(t, winner, { lock: b.lock })).resolves.toMatchObject({
            alreadyApplied: false,
          });
          // Were the "dead" holder alive after all (a force-deleted pod), its write would not land.
          const late = makeRecord();
          await expect(backend().writeSecret(t, late, { lock: a.lock })).rejects.toMatchObject({
            code: 'KR_LOCK_LOST',
          });
          expect((await other.readSecret(t))?.secret.equals(winner.secret)).toBe(true);
          await other.releaseLock(t, b.lock);
        } finally {
          await other.close();
        }
      });

      it('a retried fenced write of the same rotation is already applied, not refused', async () => {
        const t = target();
        await backend().preflight(t);
        const a = await backend().acquireLock(t, request('owner-a'));
        if (!a.acquired) throw new Error('expected the lock to be acquired');
        await backend().readState(t);
        const record = makeRecord();
        const first = await backend().writeSecret(t, record, { lock: a.lock });
        const retry = await backend().writeSecret(t, record, { lock: a.lock });
        expect(retry).toEqual({ version: first.version, alreadyApplied: true });
        await backend().releaseLock(t, a.lock);
      });
    });

    describe('slot and probe bookkeeping (invariant 10)', () => {
      it('records which API key the rotation stored, and readState returns it', async () => {
        const t = target();
        const record = makeRecord({ keyId: 'key_slot_b' });
        const written = await backend().writeSecret(t, record);
        await backend().recordRotation(t, {
          rotationId: record.rotationId,
          rotatedAt: record.rotatedAt,
          version: written.version,
          keyId: 'key_slot_b',
        });
        expect((await backend().readState(t)).lastKeyId).toBe('key_slot_b');
        const next = makeRecord({ keyId: 'key_slot_a' });
        const again = await backend().writeSecret(t, next);
        await backend().recordRotation(t, {
          rotationId: next.rotationId,
          rotatedAt: next.rotatedAt,
          version: again.version,
          keyId: 'key_slot_a',
        });
        expect((await backend().readState(t)).lastKeyId).toBe('key_slot_a');
      });

      it('a rotation recorded without keyId leaves lastKeyId unset (older records)', async () => {
        const t = target();
        const record = makeRecord();
        const written = await backend().writeSecret(t, record);
        await backend().recordRotation(t, {
          rotationId: record.rotationId,
          rotatedAt: record.rotatedAt,
          version: written.version,
        });
        expect((await backend().readState(t)).lastKeyId).toBeUndefined();
      });

      it('records a drift probe and shows the latest in readState, without touching the secret or the intent', async () => {
        const t = target();
        const record = makeRecord();
        const written = await backend().writeSecret(t, record);
        await backend().setIntent(t, makeIntent('rot-probe-1'));
        await backend().recordProbe(t, { at: '2030-01-01T01:00:00.000Z', result: 'works' });
        await backend().recordProbe(t, { at: '2030-01-01T02:00:00.000Z', result: 'dead' });
        const state = await backend().readState(t);
        expect(state.lastProbe).toEqual({ at: '2030-01-01T02:00:00.000Z', result: 'dead' });
        expect(state.intent?.rotationId).toBe('rot-probe-1');
        const stored = await backend().readSecret(t);
        expect(stored?.secret.equals(record.secret)).toBe(true);
        expect(stored?.version).toBe(written.version);
      });

      it('readPrevious, where offered, returns the value the latest write replaced', async () => {
        const readPrevious = backend().readPrevious?.bind(backend());
        if (readPrevious === undefined) return;
        const t = target({ format: 'json', fields: ['keyId', 'rotationId'] });
        expect(await readPrevious(t)).toBeUndefined();
        const first = makeRecord({ keyId: 'key_slot_a' });
        await backend().writeSecret(t, first);
        expect(await readPrevious(t)).toBeUndefined();
        const second = makeRecord({ keyId: 'key_slot_b' });
        await backend().writeSecret(t, second);
        expect((await readPrevious(t))?.secret.equals(first.secret)).toBe(true);
        expect((await backend().readSecret(t))?.secret.equals(second.secret)).toBe(true);
      });
    });

    describe('intent marker', () => {
      it('is set and shown by readState', async () => {
        const t = target();
        const intent = makeIntent('rot-intent-1');
        await backend().setIntent(t, intent);
        expect((await backend().readState(t)).intent).toEqual(intent);
      });

      it('keeps holdUntil (a marker nobody may clear before then)', async () => {
        const t = target();
        const intent = makeIntent('rot-intent-hold', { holdUntil: '2030-01-01T00:10:00.000Z' });
        await backend().setIntent(t, intent);
        expect((await backend().readState(t)).intent).toEqual(intent);
      });

      it("keeps a leak's reason and stored fingerprint (recovery rolls a leak its run left open), with and without holdUntil", async () => {
        const t = target();
        const leak = makeIntent('rot-intent-leak', { reason: 'leak' });
        await backend().setIntent(t, leak);
        expect((await backend().readState(t)).intent).toEqual(leak);
        const held = makeIntent('rot-intent-leak-held', {
          reason: 'compromise',
          holdUntil: '2030-01-01T00:10:00.000Z',
          storedFingerprint: '0123456789ab',
        });
        await backend().setIntent(t, held);
        expect((await backend().readState(t)).intent).toEqual(held);
      });

      it('is not cleared for another rotation id', async () => {
        const t = target();
        await backend().setIntent(t, makeIntent('rot-intent-2'));
        await backend().clearIntent(t, 'rot-other');
        expect((await backend().readState(t)).intent?.rotationId).toBe('rot-intent-2');
      });

      it('is cleared for its own rotation id', async () => {
        const t = target();
        await backend().writeSecret(t, makeRecord());
        await backend().setIntent(t, makeIntent('rot-intent-3'));
        await backend().clearIntent(t, 'rot-intent-3');
        expect((await backend().readState(t)).intent).toBeUndefined();
      });

      it('does not change the stored secret', async () => {
        const t = target();
        const record = makeRecord();
        const written = await backend().writeSecret(t, record);
        await backend().setIntent(t, makeIntent('rot-intent-4'));
        await backend().clearIntent(t, 'rot-intent-4');
        const stored = await backend().readSecret(t);
        expect(stored?.secret.equals(record.secret)).toBe(true);
        expect(stored?.version).toBe(written.version);
      });
    });

    describe('state', () => {
      it('says exists: false for a missing target', async () => {
        const state = await backend().readState(target());
        expect(state.exists).toBe(false);
        expect(state.lastRotatedAt).toBeUndefined();
        expect(state.intent).toBeUndefined();
        expect(state.lock).toBeUndefined();
      });

      it('records a rotation as lastRotatedAt and lastRotationId', async () => {
        const t = target();
        const record = makeRecord();
        const written = await backend().writeSecret(t, record);
        await backend().recordRotation(t, {
          rotationId: record.rotationId,
          rotatedAt: '2030-01-02T03:04:05.000Z',
          version: written.version,
        });
        const state = await backend().readState(t);
        expect(state).toMatchObject({
          exists: true,
          lastRotatedAt: '2030-01-02T03:04:05.000Z',
          lastRotationId: record.rotationId,
        });
      });

      it('records a rotation and clears its own intent marker in one call (clearIntent)', async () => {
        const t = target();
        const record = makeRecord();
        await backend().setIntent(t, makeIntent(record.rotationId));
        const written = await backend().writeSecret(t, record);
        await backend().recordRotation(
          t,
          { rotationId: record.rotationId, rotatedAt: '2030-01-05T00:00:00.000Z', version: written.version },
          { clearIntent: true },
        );
        const state = await backend().readState(t);
        expect(state).toMatchObject({
          exists: true,
          lastRotatedAt: '2030-01-05T00:00:00.000Z',
          lastRotationId: record.rotationId,
        });
        expect(state.intent).toBeUndefined();
        expect((await backend().readSecret(t))?.secret.equals(record.secret)).toBe(true);
      });

      it('records a rotation but keeps the intent marker of another rotation (clearIntent)', async () => {
        const t = target();
        const record = makeRecord();
        const written = await backend().writeSecret(t, record);
        await backend().setIntent(t, makeIntent('rot-someone-else'));
        await backend().recordRotation(
          t,
          { rotationId: record.rotationId, rotatedAt: record.rotatedAt, version: written.version },
          { clearIntent: true },
        );
        const state = await backend().readState(t);
        expect(state.lastRotationId).toBe(record.rotationId);
        expect(state.intent?.rotationId).toBe('rot-someone-else');
      });

      it('records the last failure', async () => {
        const t = target();
        const failure: FailureRecord = {
          rotationId: 'rot-failed',
          step: 'store',
          errorCode: 'KR_BACKEND_UNAVAILABLE',
          at: '2030-01-03T00:00:00.000Z',
        };
        await backend().recordFailure(t, failure);
        expect((await backend().readState(t)).lastFailure).toEqual(failure);
      });

      it('records the failure streak (backoff, quarantine), and a later record without one leaves none behind', async () => {
        const t = target();
        const streak: FailureRecord = {
          rotationId: 'rot-fifth',
          step: 'preflight',
          errorCode: 'KR_BACKEND_DENIED',
          at: '2030-01-03T05:00:00.000Z',
          consecutive: 5,
          firstAt: '2030-01-03T00:00:00.000Z',
          nextAttemptAt: '2030-01-03T21:00:00.000Z',
          quarantinedAt: '2030-01-03T05:00:00.000Z',
          lastAlertedAt: '2030-01-03T05:00:00.000Z',
        };
        await backend().recordFailure(t, streak);
        expect((await backend().readState(t)).lastFailure).toEqual(streak);
        // A record of an older shape (no streak) replaces the whole record: no stale quarantine.
        const plain: FailureRecord = {
          rotationId: 'rot-plain',
          step: 'store',
          errorCode: 'KR_BACKEND_UNAVAILABLE',
          at: '2030-01-04T00:00:00.000Z',
        };
        await backend().recordFailure(t, plain);
        const after = (await backend().readState(t)).lastFailure;
        expect(after).toMatchObject(plain);
        expect(after?.consecutive).toBeUndefined();
        expect(after?.quarantinedAt).toBeUndefined();
      });

      it('keeps intent, last rotation and failure side by side', async () => {
        const t = target();
        const record = makeRecord();
        const written = await backend().writeSecret(t, record);
        await backend().recordRotation(t, {
          rotationId: record.rotationId,
          rotatedAt: record.rotatedAt,
          version: written.version,
        });
        const failure: FailureRecord = {
          rotationId: 'rot-later',
          step: 'roll',
          errorCode: 'KR_API_UNAVAILABLE',
          at: '2030-01-04T00:00:00.000Z',
        };
        await backend().recordFailure(t, failure);
        await backend().setIntent(t, makeIntent('rot-later'));
        const state = await backend().readState(t);
        expect(state).toMatchObject({
          lastRotationId: record.rotationId,
          lastFailure: failure,
          intent: { rotationId: 'rot-later' },
        });
      });
    });

    describe('errors', () => {
      it('never carry the secret', async () => {
        const t = fixture.failingTarget?.() ?? {
          path: '',
          shape: { format: 'raw', secretField: 'apiKey', fields: [] },
        };
        const record = makeRecord();
        const error: unknown = await backend()
          .writeSecret(t, record)
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(error).toBeInstanceOf(BackendError);
        const texts: string[] = [];
        let current: unknown = error;
        for (let depth = 0; depth < 8 && current instanceof Error; depth++) {
          texts.push(current.message, String(current.stack), inspect(current, { depth: 8 }));
          current = current.cause;
        }
        texts.push(JSON.stringify((error as BackendError).toFields()));
        expectNoSecrets(texts, [record.secret.reveal()]);
      });
    });
  });
}
