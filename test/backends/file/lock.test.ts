// The file lock under invariant 9: staleness judged by the filesystem's clock as well as
// keyroll's, refreshes that never create a lock, and fenced writes that a runner whose lock was
// taken over cannot land. The shared contract (backend.test.ts) covers the common cases;
// these are the file-only ones (lock files written by hand stand for another host's runner).
import { mkdir, readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { FileBackend } from '../../../src/backends/file/backend.ts';
import type { HeldLock, StoreTarget } from '../../../src/backends/types.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { makeRecord } from '../contract.ts';

const t: StoreTarget = { path: 'k', shape: { format: 'raw', secretField: 'apiKey', fields: [] } };

describe('file lock (invariant 9)', () => {
  const directory = useTempDir('keyroll-file-lock-');
  let base: string;
  let lockFile: string;
  /** A runner on the system clock (no injected clock): what production builds. */
  let backend: FileBackend;

  beforeEach(async () => {
    base = join(directory.path(), 'base');
    lockFile = join(base, 'k.keyroll.lock');
    await mkdir(base, { recursive: true });
    backend = new FileBackend('files', { kind: 'file', directory: base });
  });

  /** A lock another host's runner wrote just now, with a clock that ran `behindMs` behind. */
  async function lockOfSkewedRunner(behindMs: number, ttlMs = 60_000): Promise<void> {
    const expiresAt = new Date(Date.now() - behindMs + ttlMs).toISOString();
    await writeFile(
      lockFile,
      JSON.stringify({
        owner: 'skewed',
        rotationId: 'r-skewed',
        expiresAt,
        token: 'skewed-token',
        ttlMs,
        clockOffsetMs: 0,
      }),
    );
  }

  /** Makes the lock file look `ageMs` old to the filesystem. */
  async function ageLockFile(ageMs: number): Promise<void> {
    const then = new Date(Date.now() - ageMs);
    await utimes(lockFile, then, then);
  }

  describe('staleness', () => {
    it('does not take over a lock written moments ago by a runner whose clock runs behind, though its expiry has passed', async () => {
      await lockOfSkewedRunner(5 * 60_000);
      const outcome = await backend.acquireLock(t, { owner: 'contender', rotationId: 'r2', ttlMs: 60_000 });
      expect(outcome).toMatchObject({ acquired: false, holder: { owner: 'skewed' } });
      expect(JSON.parse(await readFile(lockFile, 'utf8'))).toMatchObject({ owner: 'skewed' });
    });

    it('takes it over once the filesystem clock says the file is older than its TTL', async () => {
      await lockOfSkewedRunner(5 * 60_000);
      await ageLockFile(61_000);
      const outcome = await backend.acquireLock(t, { owner: 'contender', rotationId: 'r2', ttlMs: 60_000 });
      expect(outcome).toMatchObject({ acquired: true, lock: { owner: 'contender', tookOver: true } });
    });

    it('waits clockSkewMs beyond the TTL on the filesystem clock too', async () => {
      await lockOfSkewedRunner(5 * 60_000);
      await ageLockFile(61_000);
      const request = { owner: 'contender', rotationId: 'r2', ttlMs: 60_000, clockSkewMs: 30_000 };
      expect((await backend.acquireLock(t, request)).acquired).toBe(false);
      await ageLockFile(91_000);
      expect(await backend.acquireLock(t, request)).toMatchObject({
        acquired: true,
        lock: { tookOver: true },
      });
    });

    it("leaves an aged lock file alone while keyroll's clock says it has not expired", async () => {
      await lockOfSkewedRunner(0);
      await ageLockFile(10 * 60_000);
      expect(
        (await backend.acquireLock(t, { owner: 'contender', rotationId: 'r2', ttlMs: 60_000 })).acquired,
      ).toBe(false);
    });

    it("judges a lock of an older keyroll (no ttlMs) by keyroll's clock alone", async () => {
      await writeFile(
        lockFile,
        JSON.stringify({
          owner: 'old',
          rotationId: 'r-old',
          expiresAt: new Date(Date.now() - 1_000).toISOString(),
          token: 'old-token',
        }),
      );
      expect(
        await backend.acquireLock(t, { owner: 'contender', rotationId: 'r2', ttlMs: 60_000 }),
      ).toMatchObject({ acquired: true, lock: { tookOver: true } });
    });

    it('restarts the filesystem age with every refresh (the file is rewritten with the new TTL)', async () => {
      const taken = await backend.acquireLock(t, { owner: 'holder', rotationId: 'r1', ttlMs: 60_000 });
      if (!taken.acquired) throw new Error('expected the lock');
      await ageLockFile(61_000);
      const aged = (await stat(lockFile)).mtimeMs;
      expect(await backend.refreshLock(t, taken.lock, 90_000)).toMatchObject({
        owner: 'holder',
        token: taken.lock.token,
      });
      expect((await stat(lockFile)).mtimeMs - aged).toBeGreaterThanOrEqual(60_000);
      expect(JSON.parse(await readFile(lockFile, 'utf8'))).toMatchObject({
        token: taken.lock.token,
        ttlMs: 90_000,
      });
    });
  });

  describe('fenced writes', () => {
    async function takenOver(): Promise<HeldLock> {
      const taken = await backend.acquireLock(t, { owner: 'former', rotationId: 'r1', ttlMs: 60_000 });
      if (!taken.acquired) throw new Error('expected the lock');
      await ageLockFile(61_000);
      const clock = { at: Date.now() + 61_000 };
      const successor = new FileBackend(
        'files',
        { kind: 'file', directory: base },
        { now: () => new Date(clock.at) },
      );
      expect(
        (await successor.acquireLock(t, { owner: 'successor', rotationId: 'r2', ttlMs: 60_000 })).acquired,
      ).toBe(true);
      return taken.lock;
    }

    it('refuses the write of a runner whose lock was taken over, leaving no temp file and no value', async () => {
      const former = await takenOver();
      await expect(backend.writeSecret(t, makeRecord(), { lock: former })).rejects.toMatchObject({
        code: 'KR_LOCK_LOST',
        retryable: false,
        operation: 'write',
      });
      expect((await readdir(base)).sort()).toEqual(['k.keyroll.lock']);
    });

    it('refuses the write of a runner whose lock was released', async () => {
      const taken = await backend.acquireLock(t, { owner: 'a', rotationId: 'r1', ttlMs: 60_000 });
      if (!taken.acquired) throw new Error('expected the lock');
      await backend.releaseLock(t, taken.lock);
      await expect(backend.writeSecret(t, makeRecord(), { lock: taken.lock })).rejects.toMatchObject({
        code: 'KR_LOCK_LOST',
      });
      expect(await backend.readSecret(t)).toBeUndefined();
    });

    it('lands with a lock that expired but was not taken over (the fence is the token, not the clock)', async () => {
      const taken = await backend.acquireLock(t, { owner: 'a', rotationId: 'r1', ttlMs: 1 });
      if (!taken.acquired) throw new Error('expected the lock');
      const record = makeRecord();
      expect(await backend.writeSecret(t, record, { lock: taken.lock })).toMatchObject({
        alreadyApplied: false,
      });
      expect((await backend.readSecret(t))?.secret.equals(record.secret)).toBe(true);
    });

    it('a refresh keeps the token, so the refreshed lock and the original both fence', async () => {
      const taken = await backend.acquireLock(t, { owner: 'a', rotationId: 'r1', ttlMs: 60_000 });
      if (!taken.acquired) throw new Error('expected the lock');
      const refreshed = await backend.refreshLock(t, taken.lock, 120_000);
      if (refreshed === undefined) throw new Error('expected the refresh');
      expect(Date.parse(refreshed.expiresAt)).toBeGreaterThan(Date.parse(taken.lock.expiresAt));
      await backend.writeSecret(t, makeRecord(), { lock: taken.lock });
      await backend.writeSecret(t, makeRecord(), { lock: refreshed });
    });

    it("a refresh of a lock taken over is undefined and leaves the successor's lock as it was", async () => {
      const former = await takenOver();
      const before = await readFile(lockFile, 'utf8');
      expect(await backend.refreshLock(t, former, 60_000)).toBeUndefined();
      expect(await readFile(lockFile, 'utf8')).toBe(before);
      await backend.releaseLock(t, former);
      expect(await readFile(lockFile, 'utf8')).toBe(before);
    });
  });
});
