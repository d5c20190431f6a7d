// A guard file (the sidecar's, the lock's takeover guard) left by a crash is removed once it is
// older than 30 s by the filesystem's clock; a live one stays.
import { mkdtemp, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { removeStaleGuard } from '../../src/backends/file/stale-guard.ts';
import { takeoverGuardPathFor, withTakeoverGuard } from '../../src/backends/file/takeover-guard.ts';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'keyroll-stale-guard-'));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function guardAged(path: string, ageMs: number): Promise<void> {
  await writeFile(path, '');
  const then = new Date(Date.now() - ageMs);
  await utimes(path, then, then);
}

describe('removeStaleGuard', () => {
  it('leaves a guard younger than 30 s, removes an older one, and counts a missing one as gone', async () => {
    const guard = join(dir, 'x.guard');
    await guardAged(guard, 5_000);
    expect(await removeStaleGuard(guard)).toBe(false);
    await expect(stat(guard)).resolves.toBeDefined();
    await guardAged(guard, 31_000);
    expect(await removeStaleGuard(guard)).toBe(true);
    await expect(stat(guard)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await removeStaleGuard(guard)).toBe(true);
  });
});

describe('withTakeoverGuard', () => {
  it('takes over a takeover guard left by a crash, and reports busy while a live one is held', async () => {
    const lock = join(dir, 'x.keyroll.lock');
    await guardAged(takeoverGuardPathFor(lock), 5_000);
    expect(await withTakeoverGuard(lock, false, () => Promise.resolve('ran'))).toBe('busy');
    await guardAged(takeoverGuardPathFor(lock), 31_000);
    expect(await withTakeoverGuard(lock, false, () => Promise.resolve('ran'))).toBe('ran');
    await expect(stat(takeoverGuardPathFor(lock))).rejects.toMatchObject({ code: 'ENOENT' });
  });
});
