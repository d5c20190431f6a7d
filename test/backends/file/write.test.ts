// The file backend's filesystem calls, recorded: the first attempt of a write after the roll is
// the atomic write alone (invariant 2: no mkdir, stat or read before it), and a lock whose file
// landed is never left behind when a later fsync fails. node:fs/promises is wrapped (not
// replaced): every call still reaches the real filesystem, it is only recorded, or made to fail.
import * as fs from 'node:fs/promises';
import { join, relative } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { FileBackend } from '../../../src/backends/file/backend.ts';
import type { StoreTarget } from '../../../src/backends/types.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { makeRecord } from '../contract.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';

const io = vi.hoisted(() => ({
  calls: [] as string[],
  /** When set, the next call equal to `call` fails with EIO (after the real call when `after`). */
  failNext: undefined as { call: string; after: boolean } | undefined,
  /** When set, runs once right after the first call equal to `call` (another process acting in between). */
  after: undefined as { call: string; run: () => Promise<void> } | undefined,
}));

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  // Recorded as `name path`; for rename and link the path is the destination (argument 1).
  const wrap =
    <A extends unknown[], R>(name: string, fn: (...args: A) => Promise<R>, pathArg = 0) =>
    async (...args: A): Promise<R> => {
      const call = `${name} ${String(args[pathArg])}`;
      io.calls.push(call);
      const fail = io.failNext?.call === call ? io.failNext : undefined;
      if (fail) io.failNext = undefined;
      if (fail && !fail.after) throw Object.assign(new Error(`${call}: injected`), { code: 'EIO' });
      const result = await fn(...args);
      if (fail?.after) throw Object.assign(new Error(`${call}: injected`), { code: 'EIO' });
      const hook = io.after?.call === call ? io.after : undefined;
      if (hook) {
        io.after = undefined;
        await hook.run();
      }
      return result;
    };
  const wrapped = {
    ...real,
    access: wrap('access', real.access),
    chmod: wrap('chmod', real.chmod),
    link: wrap('link', real.link, 1),
    lstat: wrap('lstat', real.lstat),
    mkdir: wrap('mkdir', real.mkdir),
    open: wrap('open', real.open),
    readFile: wrap('readFile', real.readFile),
    rename: wrap('rename', real.rename, 1),
    stat: wrap('stat', real.stat),
    unlink: wrap('unlink', real.unlink),
  };
  return { ...wrapped, default: wrapped };
});

describe('file backend filesystem calls', () => {
  const directory = useTempDir('keyroll-file-io-');
  let base: string;
  let backend: FileBackend;
  const t: StoreTarget = { path: 'apps/key', shape: { format: 'raw', secretField: 'apiKey', fields: [] } };
  /** The calls since `mark`, with paths relative to the backend directory and temp names folded. */
  const callsSince = (mark: number): string[] =>
    io.calls.slice(mark).map((call) => {
      const [name = '', path = ''] = call.split(' ');
      const folded = relative(base, path)
        .replace(/\.[0-9a-f]{12}\.tmp$/, '.<random>.tmp')
        .replace(/\.takeover\.[0-9a-f]{16}\.draft/, '.takeover.<id>.draft')
        .replace(/\/[0-9a-f]{16}(\/|$)/g, '/<id>$1');
      return `${name} ${folded || '.'}`;
    });

  beforeEach(() => {
    base = join(directory.path(), 'base');
    backend = new FileBackend('files', { kind: 'file', directory: base });
    io.calls.length = 0;
    io.failNext = undefined;
    io.after = undefined;
  });
  afterEach(() => {
    io.failNext = undefined;
    io.after = undefined;
  });

  it('makes the first write attempt after preflight and lock only the atomic write', async () => {
    await backend.preflight(t);
    const lock = await backend.acquireLock(t, { owner: 'a', rotationId: 'r', ttlMs: 60_000 });
    expect(lock.acquired).toBe(true);
    await backend.writeSecret(t, makeRecord()); // an earlier rotation: the value file exists
    const rollAnswered = io.calls.length;
    await backend.writeSecret(t, makeRecord());
    const calls = callsSince(rollAnswered);
    const durable = calls.indexOf('rename apps/key');
    // temp file (open wx, write, fsync, close), rename over the value, fsync of the directory.
    expect(calls.slice(0, durable + 2)).toEqual([
      'open apps/.key.<random>.tmp',
      'rename apps/key',
      'open apps',
    ]);
  });

  it('keeps the replaced value only after the durable write, before the sidecar update whose directory fsync covers it', async () => {
    await backend.preflight(t);
    const first = makeRecord();
    await backend.writeSecret(t, first);
    const rollAnswered = io.calls.length;
    await backend.writeSecret(t, makeRecord());
    const calls = callsSince(rollAnswered);
    const synced = calls.indexOf('open apps'); // the value's directory fsync: the write is durable
    const moved = calls.indexOf('rename apps/key.keyroll.previous');
    const linked = calls.indexOf('link apps/key.keyroll.current');
    const sidecar = calls.indexOf('rename apps/key.keyroll.json');
    expect(calls.indexOf('rename apps/key')).toBeLessThan(synced);
    expect(synced).toBeLessThan(moved);
    expect(moved).toBeLessThan(linked);
    expect(linked).toBeLessThan(sidecar);
    expect(calls.slice(sidecar)).toContain('open apps');
    expect((await backend.readPrevious(t))?.secret.equals(first.secret)).toBe(true);
  });

  it('does not fail a durable write whose keeping of the replaced value failed: the result says so, without the secret', async () => {
    await backend.preflight(t);
    await backend.writeSecret(t, makeRecord());
    const record = makeRecord();
    io.failNext = { call: `rename ${join(base, 'apps/key.keyroll.previous')}`, after: false };
    const written = await backend.writeSecret(t, record);
    expect(written).toMatchObject({
      version: '2',
      alreadyApplied: false,
      bookkeepingError: expect.stringContaining('keeping the value replaced') as unknown,
    });
    expectNoSecrets([written.bookkeepingError ?? ''], [record.secret.reveal()]);
    expect((await backend.readSecret(t))?.secret.equals(record.secret)).toBe(true);
  });

  it('keeps the replaced value on the retry of a write that failed after its rename', async () => {
    await backend.preflight(t);
    const first = makeRecord();
    await backend.writeSecret(t, first);
    const record = makeRecord();
    io.failNext = { call: `open ${join(base, 'apps')}`, after: true }; // the directory fsync after the rename
    await expect(backend.writeSecret(t, record)).rejects.toMatchObject({ operation: 'write' });
    expect(await backend.writeSecret(t, record)).toMatchObject({ alreadyApplied: true });
    expect((await backend.readPrevious(t))?.secret.equals(first.secret)).toBe(true);
  });

  it('reads the stored value only on a retry of the same rotation', async () => {
    await backend.preflight(t);
    const record = makeRecord();
    await backend.writeSecret(t, record);
    const retried = io.calls.length;
    expect(await backend.writeSecret(t, record)).toEqual({ version: '1', alreadyApplied: true });
    expect(callsSince(retried)).toContain('readFile apps/key');
  });

  it('creates the directory itself when no preflight or lock did', async () => {
    await backend.writeSecret(t, makeRecord());
    expect((await backend.readState(t)).exists).toBe(true);
  });

  it('takes and releases the lock atomically without fsyncing the directory; the value write still does', async () => {
    await backend.preflight(t);
    const armed = io.calls.length;
    const outcome = await backend.acquireLock(t, { owner: 'a', rotationId: 'r', ttlMs: 60_000 });
    expect(outcome.acquired).toBe(true);
    if (!outcome.acquired) return;
    await backend.releaseLock(t, outcome.lock);
    const lockCalls = callsSince(armed);
    // A finished temp file hard-linked into place (never a partial lock), then removed: moved into
    // the takeover guard's holder directory, which goes with the guard.
    expect(lockCalls).toEqual(
      expect.arrayContaining([
        'open apps/.key.keyroll.lock.<random>.tmp',
        'link apps/key.keyroll.lock',
        'rename apps/key.keyroll.lock.takeover/<id>/removed',
      ]),
    );
    expect(
      lockCalls,
      'no directory fsync for the lock (opening the directory is how it is synced)',
    ).not.toContain('open apps');
    const written = io.calls.length;
    await backend.writeSecret(t, makeRecord());
    expect(callsSince(written)).toContain('open apps');
    expect((await backend.acquireLock(t, { owner: 'b', rotationId: 'r2', ttlMs: 60_000 })).acquired).toBe(
      true,
    );
  });

  it('still throws when the lock write itself failed, leaving no lock', async () => {
    await backend.preflight(t);
    io.failNext = { call: `link ${join(base, 'apps/key.keyroll.lock')}`, after: false };
    await expect(
      backend.acquireLock(t, { owner: 'a', rotationId: 'r', ttlMs: 60_000 }),
    ).rejects.toMatchObject({ code: 'KR_BACKEND_FAILED', operation: 'lock' });
    expect((await backend.readState(t)).lock).toBeUndefined();
  });

  it("makes a fenced write write its value into the takeover guard's holder directory first, then take the guard, check the lock and rename", async () => {
    await backend.preflight(t);
    const lock = await backend.acquireLock(t, { owner: 'a', rotationId: 'r', ttlMs: 60_000 });
    if (!lock.acquired) throw new Error('expected the lock');
    const rollAnswered = io.calls.length;
    await backend.writeSecret(t, makeRecord(), { lock: lock.lock });
    const calls = callsSince(rollAnswered);
    // The guard's draft and its holder directory, the value written (and fsynced) in it, the draft
    // renamed into place as the guard, the lock read, the value renamed into place from the guard,
    // the value's directory fsynced.
    expect(calls.slice(0, 4)).toEqual([
      'mkdir apps/key.keyroll.lock.takeover.<id>.draft',
      'mkdir apps/key.keyroll.lock.takeover.<id>.draft/<id>',
      'open apps/key.keyroll.lock.takeover.<id>.draft/<id>/value',
      'rename apps/key.keyroll.lock.takeover',
    ]);
    const checked = calls.indexOf('readFile apps/key.keyroll.lock');
    const renamed = calls.indexOf('rename apps/key');
    expect(checked).toBeGreaterThan(3);
    expect(renamed).toBeGreaterThan(checked);
    expect(calls[renamed + 1]).toBe('open apps');
    expect(await fs.readdir(join(base, 'apps'))).not.toContain('key.keyroll.lock.takeover');
  });

  it("leaves alone a lock taken over between the release's first look and its removal", async () => {
    await backend.preflight(t);
    const lock = await backend.acquireLock(t, { owner: 'a', rotationId: 'r', ttlMs: 60_000 });
    if (!lock.acquired) throw new Error('expected the lock');
    const lockFile = join(base, 'apps/key.keyroll.lock');
    const successor = JSON.stringify({
      owner: 'b',
      rotationId: 'r2',
      expiresAt: '2999-01-01T00:00:00.000Z',
      token: 'successor-token',
      ttlMs: 60_000,
      clockOffsetMs: 0,
    });
    // Another runner's takeover lands right after the release read the lock and found its token.
    io.after = { call: `readFile ${lockFile}`, run: () => fs.writeFile(lockFile, successor) };
    await backend.releaseLock(t, lock.lock);
    expect(await fs.readFile(lockFile, 'utf8')).toBe(successor);
  });
});
