// Fenced locks on Vault (invariant 9), against a real OpenBao: the lock is refreshed by one
// check-and-set write keeping its token; a write fenced by the lock checks-and-sets against the
// data version read under that lock and never against a fresh read, so a runner whose lock was
// taken over cannot overwrite the new holder's secret, not even on a retry; and the intent
// marker keeps holdUntil. The shared contract (vault-backend.test.ts) covers the common cases.
import { afterEach, describe, expect, it } from 'vitest';
import type { HeldLock, StoreTarget } from '../../src/backends/types.ts';
import type { VaultBackend } from '../../src/backends/vault/backend.ts';
import { createTestClock, makeRecord, type TestClock } from '../backends/contract.ts';
import { vaultServer, type VaultServer } from './servers.ts';
import {
  makeVaultBackend,
  recordRequests,
  uniqueName,
  vaultAdmin,
  type RequestRecorder,
} from './vault-admin.ts';

const server = vaultServer();

let active: RequestRecorder | undefined;
const opened: VaultBackend[] = [];
afterEach(async () => {
  active?.stop();
  active = undefined;
  await Promise.all(opened.splice(0).map((backend) => backend.close()));
});

function requestsTo(...parts: string[]): RequestRecorder {
  active = recordRequests('undici:request:create', ...parts);
  return active;
}

const raw = (name: string): StoreTarget => ({
  path: `fence/${uniqueName(name)}`,
  shape: { format: 'raw', secretField: 'apiKey', fields: [] },
});

describe.skipIf(server === undefined)('vault fenced locks (invariant 9)', () => {
  const vault = server as VaultServer;
  const admin = vaultAdmin(vault);

  function open(clock?: TestClock): VaultBackend {
    const backend = makeVaultBackend(vault, clock === undefined ? {} : { clock });
    opened.push(backend);
    return backend;
  }

  /** A runner that preflighted `t`, took its lock and read the state under it, as the engine does. */
  async function lockedRunner(
    t: StoreTarget,
    owner: string,
    ttlMs: number,
    clock?: TestClock,
  ): Promise<{ backend: VaultBackend; lock: HeldLock }> {
    const backend = open(clock);
    await backend.preflight(t);
    const taken = await backend.acquireLock(t, { owner, rotationId: `r-${owner}`, ttlMs });
    if (!taken.acquired) throw new Error(`expected ${owner} to take the lock`);
    await backend.readState(t);
    return { backend, lock: taken.lock };
  }

  /** `former` held the lock of `t` (TTL 1 s); the clock passed it, and a successor took it over and stored its secret. */
  async function takenOver(
    t: StoreTarget,
  ): Promise<{ former: VaultBackend; lock: HeldLock; successor: VaultBackend; winner: string }> {
    const clock = createTestClock();
    await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_before_the_rotations_0001' } });
    const { backend: former, lock } = await lockedRunner(t, 'former', 1_000, clock);
    clock.advance(2_000);
    const { backend: successor, lock: successorLock } = await lockedRunner(t, 'successor', 600_000, clock);
    const record = makeRecord();
    await successor.writeSecret(t, record, { lock: successorLock });
    await successor.readSecret(t); // waits for the bookkeeping that write left running
    return { former, lock, successor, winner: record.secret.reveal() };
  }

  /** `former` holds the lock of `t` (TTL 1 s) and read its version; the clock passed it and `successor` took the lock over, writing nothing yet. */
  async function takenOverBeforeAnyWrite(
    t: StoreTarget,
    seed?: string,
  ): Promise<{ former: VaultBackend; lock: HeldLock; successor: VaultBackend; successorLock: HeldLock }> {
    const clock = createTestClock();
    if (seed !== undefined) await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: seed } });
    const { backend: former, lock } = await lockedRunner(t, 'former', 1_000, clock);
    clock.advance(2_000);
    const { backend: successor, lock: successorLock } = await lockedRunner(t, 'successor', 600_000, clock);
    return { former, lock, successor, successorLock };
  }

  describe('the old holder resumes before the new holder writes (issue 18, finding 2)', () => {
    it('costs a takeover 4 requests more than a plain acquisition: the data read, the lock read that confirms it, the copy, the copy record', async () => {
      const t = raw('takeover-requests');
      const clock = createTestClock();
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_before_the_rotations_0004' } });
      await lockedRunner(t, 'former', 1_000, clock);
      clock.advance(2_000);
      const successor = open(clock);
      await successor.preflight(t);
      const requests = requestsTo(t.path);
      expect(
        await successor.acquireLock(t, { owner: 'successor', rotationId: 'r-successor', ttlMs: 600_000 }),
      ).toMatchObject({ acquired: true, lock: { tookOver: true } });
      expect(requests.seen).toEqual([
        `GET /v1/secret/data/${t.path}.keyroll-lock`,
        `POST /v1/secret/data/${t.path}.keyroll-lock`,
        `GET /v1/secret/metadata/${t.path}`,
        `GET /v1/secret/data/${t.path}`,
        `GET /v1/secret/data/${t.path}.keyroll-lock`,
        `POST /v1/secret/data/${t.path}`,
        `POST /v1/secret/metadata/${t.path}`,
      ]);
    });

    it("refuses the old holder's write and lands the new holder's: the takeover moved the version the old fence checks", async () => {
      const t = raw('resumes-first');
      const { former, lock, successor, successorLock } = await takenOverBeforeAnyWrite(
        t,
        'sk_before_the_rotations_0002',
      );
      // The takeover wrote the value again, unchanged, as the next version.
      expect(await admin.readData(t.path)).toMatchObject({
        data: { apiKey: 'sk_before_the_rotations_0002' },
        version: 2,
      });
      const late = makeRecord();
      await expect(former.writeSecret(t, late, { lock })).rejects.toMatchObject({
        code: 'KR_LOCK_LOST',
        retryable: false,
      });
      const winner = makeRecord();
      await expect(successor.writeSecret(t, winner, { lock: successorLock })).resolves.toEqual({
        version: '3',
        alreadyApplied: false,
      });
      expect((await admin.readData(t.path)).data).toEqual({ apiKey: winner.secret.reveal() });
    });

    it("does the same on a path never written: the takeover writes an empty version, so the old holder's create-only write is refused", async () => {
      const t = raw('resumes-first-new');
      const { former, lock, successor, successorLock } = await takenOverBeforeAnyWrite(t);
      expect(await admin.readData(t.path)).toMatchObject({ data: {}, version: 1 });
      expect(await successor.readSecret(t)).toBeUndefined();
      await expect(former.writeSecret(t, makeRecord(), { lock })).rejects.toMatchObject({
        code: 'KR_LOCK_LOST',
      });
      const winner = makeRecord();
      await successor.writeSecret(t, winner, { lock: successorLock });
      expect((await admin.readData(t.path)).data).toEqual({ apiKey: winner.secret.reveal() });
    });

    it('attributes the copy to the rotation that wrote the value it copies, so recovery still finds that write', async () => {
      const t = raw('copy-writer');
      const clock = createTestClock();
      const { backend: former, lock } = await lockedRunner(t, 'former', 1_000, clock);
      const written = makeRecord();
      await former.setIntent(t, {
        rotationId: written.rotationId,
        keyId: written.keyId,
        owner: 'former',
        startedAt: written.rotatedAt,
      });
      // The former holder's write landed (its marker names the version it created); then it stalled.
      await former.writeSecret(t, written, { lock });
      clock.advance(2_000);
      const { backend: successor } = await lockedRunner(t, 'successor', 600_000, clock);
      expect(await admin.readData(t.path)).toMatchObject({
        data: { apiKey: written.secret.reveal() },
        version: 2,
      });
      expect(await successor.readSecret(t)).toMatchObject({ version: '2', rotationId: written.rotationId });
    });

    it("takes the forecast off a marker whose rotation has not written: the copy is not that rotation's write", async () => {
      const t = raw('copy-forecast');
      const clock = createTestClock();
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_before_the_rotations_0003' } });
      const { backend: former } = await lockedRunner(t, 'former', 1_000, clock);
      await former.setIntent(t, {
        rotationId: 'r-stalled',
        keyId: 'k',
        owner: 'former',
        startedAt: '2030-01-01T00:00:00.000Z',
        holdUntil: '2030-01-01T00:10:00.000Z',
      });
      expect(JSON.parse((await admin.customMetadata(t.path)).keyroll_intent ?? '{}')).toMatchObject({
        writeVersion: 2,
      });
      clock.advance(2_000);
      const { backend: successor } = await lockedRunner(t, 'successor', 600_000, clock);
      expect(await admin.readData(t.path)).toMatchObject({ version: 2 });
      const stored = await successor.readSecret(t);
      expect(stored?.version).toBe('2');
      expect(stored?.rotationId).toBeUndefined();
      // The marker itself stays (its runner may still act), without the forecast.
      expect(JSON.parse((await admin.customMetadata(t.path)).keyroll_intent ?? '{}')).toEqual({
        rotationId: 'r-stalled',
        keyId: 'k',
        owner: 'former',
        startedAt: '2030-01-01T00:00:00.000Z',
        holdUntil: '2030-01-01T00:10:00.000Z',
      });
    });

    it('reads the value before the copy as the previous one (the standby slot), not the copy', async () => {
      const t = raw('copy-previous');
      const clock = createTestClock();
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_standby_slot_secret_00001' } });
      await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_active_slot_secret_000001' } });
      await lockedRunner(t, 'former', 1_000, clock);
      clock.advance(2_000);
      const { backend: successor } = await lockedRunner(t, 'successor', 1_000, clock);
      expect(await admin.readData(t.path)).toMatchObject({
        data: { apiKey: 'sk_active_slot_secret_000001' },
        version: 3,
      });
      expect(await successor.readPrevious(t)).toMatchObject({ version: '1' });
      expect((await successor.readPrevious(t))?.secret.reveal()).toBe('sk_standby_slot_secret_00001');
      // A second takeover without a write in between copies the copy: still the same previous value.
      clock.advance(2_000);
      const { backend: third } = await lockedRunner(t, 'third', 600_000, clock);
      expect(await admin.readData(t.path)).toMatchObject({ version: 4 });
      expect(JSON.parse((await admin.customMetadata(t.path)).keyroll_copied_version ?? '{}')).toEqual({
        version: 4,
        of: 2,
      });
      expect((await third.readPrevious(t))?.secret.reveal()).toBe('sk_standby_slot_secret_00001');
    });
  });

  it('keeps the fenced write after the roll a single data write', async () => {
    const t = raw('one-write');
    const { backend, lock } = await lockedRunner(t, 'holder', 600_000);
    const record = makeRecord();
    await backend.setIntent(t, {
      rotationId: record.rotationId,
      keyId: record.keyId,
      owner: 'holder',
      startedAt: record.rotatedAt,
    });
    const requests = requestsTo(t.path, '/v1/auth/token/');
    await backend.writeSecret(t, record, { lock });
    expect(requests.seen).toEqual([`POST /v1/secret/data/${t.path}`]);
  });

  it('refreshes with one check-and-set write against the version its lock write created, keeping the token', async () => {
    const t = raw('refresh');
    const { backend, lock } = await lockedRunner(t, 'holder', 600_000);
    const requests = requestsTo(t.path);
    const refreshed = await backend.refreshLock(t, lock, 900_000);
    expect(requests.seen).toEqual([`POST /v1/secret/data/${t.path}.keyroll-lock`]);
    expect(refreshed).toMatchObject({ owner: 'holder', token: lock.token });
    expect((await admin.readData(`${t.path}.keyroll-lock`)).data).toMatchObject({
      token: lock.token,
      expiresAt: refreshed?.expiresAt,
      state: 'held',
    });
  });

  it('refreshes a lock it holds but whose entry version it does not know (another instance took it): a read, then the write', async () => {
    const t = raw('refresh-unknown');
    const { lock } = await lockedRunner(t, 'holder', 600_000);
    const other = open();
    const requests = requestsTo(t.path);
    expect(await other.refreshLock(t, lock, 900_000)).toMatchObject({ token: lock.token });
    expect(requests.seen).toEqual([
      `GET /v1/secret/data/${t.path}.keyroll-lock`,
      `POST /v1/secret/data/${t.path}.keyroll-lock`,
    ]);
  });

  it('reports a taken-over lock as lost on refresh, writing nothing, and then refuses its fenced write with no request', async () => {
    const t = raw('refresh-lost');
    const { former, lock, winner } = await takenOver(t);
    const before = await admin.readData(`${t.path}.keyroll-lock`);
    expect(await former.refreshLock(t, lock, 600_000)).toBeUndefined();
    expect(await admin.readData(`${t.path}.keyroll-lock`)).toEqual(before);
    const requests = requestsTo(t.path, '/v1/auth/token/');
    await expect(former.writeSecret(t, makeRecord(), { lock })).rejects.toMatchObject({
      code: 'KR_LOCK_LOST',
      retryable: false,
    });
    expect(requests.seen).toEqual([]);
    expect((await admin.readData(t.path)).data).toEqual({ apiKey: winner });
  });

  it('refuses the write of a runner that did not notice the takeover: the refused write, then the reads that tell why; a retry sends nothing', async () => {
    const t = raw('late-writer');
    const { former, lock, winner } = await takenOver(t);
    const late = makeRecord();
    const requests = requestsTo(t.path);
    await expect(former.writeSecret(t, late, { lock })).rejects.toMatchObject({
      code: 'KR_LOCK_LOST',
      operation: 'write',
    });
    expect(requests.seen).toEqual([
      `POST /v1/secret/data/${t.path}`,
      `GET /v1/secret/data/${t.path}`,
      `GET /v1/secret/data/${t.path}.keyroll-lock`,
    ]);
    await expect(former.writeSecret(t, late, { lock })).rejects.toMatchObject({ code: 'KR_LOCK_LOST' });
    expect(requests.seen).toHaveLength(3);
    expect((await admin.readData(t.path)).data).toEqual({ apiKey: winner });
  });

  it('calls a write made outside keyroll while it holds the lock a conflict, and never overwrites it on a retry', async () => {
    const t = raw('outside-writer');
    const { backend, lock } = await lockedRunner(t, 'holder', 600_000);
    await admin.must('POST', `secret/data/${t.path}`, { data: { apiKey: 'sk_written_by_an_operator_0001' } });
    const record = makeRecord();
    await expect(backend.writeSecret(t, record, { lock })).rejects.toMatchObject({
      code: 'KR_BACKEND_CONFLICT',
      retryable: false,
    });
    await expect(backend.writeSecret(t, record, { lock })).rejects.toMatchObject({
      code: 'KR_BACKEND_CONFLICT',
    });
    expect((await admin.readData(t.path)).data).toEqual({ apiKey: 'sk_written_by_an_operator_0001' });
  });

  it('refuses a fenced write with no data version read under the lock, before any request', async () => {
    const t = raw('no-version');
    const { lock } = await lockedRunner(t, 'holder', 600_000);
    const stranger = open();
    const requests = requestsTo(t.path, '/v1/auth/token/');
    await expect(stranger.writeSecret(t, makeRecord(), { lock })).rejects.toMatchObject({
      code: 'KR_LOCK_LOST',
    });
    expect(requests.seen).toEqual([]);
    expect((await admin.readData(t.path)).status).toBe(404);
  });

  it('takes a lock over only clockSkewMs past its expiry', async () => {
    const t = raw('skew');
    const clock = createTestClock();
    await lockedRunner(t, 'holder', 10_000, clock);
    clock.advance(15_000);
    const contender = open(clock);
    expect(
      (
        await contender.acquireLock(t, {
          owner: 'contender',
          rotationId: 'r-c',
          ttlMs: 60_000,
          clockSkewMs: 10_000,
        })
      ).acquired,
    ).toBe(false);
    clock.advance(5_000);
    expect(
      await contender.acquireLock(t, {
        owner: 'contender',
        rotationId: 'r-c',
        ttlMs: 60_000,
        clockSkewMs: 10_000,
      }),
    ).toMatchObject({ acquired: true, lock: { tookOver: true } });
  });

  it('writes holdUntil into keyroll_intent beside the version forecast, and reads a marker of an older keyroll without it', async () => {
    const t = raw('hold');
    const { backend } = await lockedRunner(t, 'holder', 600_000);
    await backend.setIntent(t, {
      rotationId: 'r-hold',
      keyId: 'k',
      owner: 'holder',
      startedAt: '2030-01-01T00:00:00.000Z',
      holdUntil: '2030-01-01T00:10:00.000Z',
    });
    expect(JSON.parse((await admin.customMetadata(t.path)).keyroll_intent ?? '{}')).toEqual({
      rotationId: 'r-hold',
      keyId: 'k',
      owner: 'holder',
      startedAt: '2030-01-01T00:00:00.000Z',
      holdUntil: '2030-01-01T00:10:00.000Z',
      writeVersion: 1,
    });
    const older = raw('older-marker');
    const marker = {
      rotationId: 'r-old',
      keyId: 'k',
      owner: 'old-host/1/x',
      startedAt: '2030-01-01T00:00:00.000Z',
      writeVersion: 3,
    };
    await admin.must('POST', `secret/metadata/${older.path}`, {
      custom_metadata: { keyroll_intent: JSON.stringify(marker) },
    });
    expect((await open().readState(older)).intent).toEqual({
      rotationId: 'r-old',
      keyId: 'k',
      owner: 'old-host/1/x',
      startedAt: '2030-01-01T00:00:00.000Z',
    });
  });
});
