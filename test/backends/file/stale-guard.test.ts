// A guard (the sidecar's guard file, the lock's takeover guard) left by a crash is removed once it
// is older than 30 s by the filesystem's clock; a live one stays. A takeover guard's holder that
// was only paused finds, when it resumes, that what it meant to move into place moves nowhere.
import { mkdir, readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { removeStaleGuard } from '../../../src/backends/file/stale-guard.ts';
import { takeoverGuardPathFor, withTakeoverGuard } from '../../../src/backends/file/takeover-guard.ts';
import { useTempDir } from '../../support/temp-dir.ts';

const dir = useTempDir('keyroll-stale-guard-');

async function guardAged(path: string, ageMs: number): Promise<void> {
  await writeFile(path, '');
  const then = new Date(Date.now() - ageMs);
  await utimes(path, then, then);
}

describe('removeStaleGuard', () => {
  it('leaves a guard younger than 30 s, removes an older one, and counts a missing one as gone', async () => {
    const guard = join(dir.path(), 'x.guard');
    await guardAged(guard, 5_000);
    expect(await removeStaleGuard(guard)).toBe(false);
    await expect(stat(guard)).resolves.toBeDefined();
    await guardAged(guard, 31_000);
    expect(await removeStaleGuard(guard)).toBe(true);
    await expect(stat(guard)).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await removeStaleGuard(guard)).toBe(true);
  });
});

async function age(path: string, ageMs: number): Promise<void> {
  const then = new Date(Date.now() - ageMs);
  await utimes(path, then, then);
}

/** Ages every holder directory of a takeover guard as if its holder had been paused `ageMs`. */
async function holdersAged(guard: string, ageMs: number): Promise<void> {
  for (const holder of await readdir(guard)) await age(join(guard, holder), ageMs);
}

describe('withTakeoverGuard', () => {
  it('takes over a guard file an older keyroll left by a crash, and reports busy while a live one is held', async () => {
    const lock = join(dir.path(), 'x.keyroll.lock');
    await guardAged(takeoverGuardPathFor(lock), 5_000);
    expect(await withTakeoverGuard(lock, { wait: false }, () => Promise.resolve('ran'))).toBe('busy');
    await guardAged(takeoverGuardPathFor(lock), 31_000);
    expect(await withTakeoverGuard(lock, { wait: false }, () => Promise.resolve('ran'))).toBe('ran');
    await expect(stat(takeoverGuardPathFor(lock))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('takes over a guard whose holder left it by a crash 30 s ago, and reports busy while its holder is younger', async () => {
    const lock = join(dir.path(), 'x.keyroll.lock');
    const guard = takeoverGuardPathFor(lock);
    await mkdir(join(guard, 'crashed0holder00'), { recursive: true });
    await holdersAged(guard, 5_000);
    expect(await withTakeoverGuard(lock, { wait: false }, () => Promise.resolve('ran'))).toBe('busy');
    await holdersAged(guard, 31_000);
    expect(await withTakeoverGuard(lock, { wait: false }, () => Promise.resolve('ran'))).toBe('ran');
    // Nothing is left behind: the guard, its drafts, the stale holder moved aside.
    expect(await readdir(dir.path())).toEqual([]);
  });

  it("moves nothing into place for a holder paused past the guard's staleness once another took the guard", async () => {
    const lock = join(dir.path(), 'x.keyroll.lock');
    const guard = takeoverGuardPathFor(lock);
    const target = join(dir.path(), 'x');
    await writeFile(target, 'before');
    let resume: () => void = () => undefined;
    const paused = new Promise<void>((resolve) => {
      resume = resolve;
    });
    let checked: () => void = () => undefined;
    const atCheck = new Promise<void>((resolve) => {
      checked = resolve;
    });
    // The holder checked what it had to under the guard, then stalls before its move.
    const holder = withTakeoverGuard(
      lock,
      { wait: true, stage: { name: 'value', content: 'from-the-paused-holder', safety: 'durable' } },
      async (held) => {
        checked();
        await paused;
        await held.place('value', target);
        return 'placed';
      },
    );
    await atCheck;
    await holdersAged(guard, 31_000);
    const contender = await withTakeoverGuard(
      lock,
      { wait: false, stage: { name: 'value', content: 'from-the-new-holder', safety: 'durable' } },
      async (held) => {
        await held.place('value', target);
        return 'placed';
      },
    );
    expect(contender).toBe('placed');
    resume();
    await expect(holder).rejects.toMatchObject({ code: 'EBUSY' });
    expect(await readFile(target, 'utf8')).toBe('from-the-new-holder');
    expect((await readdir(dir.path())).sort()).toEqual(['x']);
  });

  it("removes a file under the guard by moving it into the holder's directory, and answers absent for a missing one", async () => {
    const lock = join(dir.path(), 'x.keyroll.lock');
    await writeFile(lock, '{}');
    expect(await withTakeoverGuard(lock, { wait: true }, (held) => held.remove(lock))).toBe('removed');
    expect(await withTakeoverGuard(lock, { wait: true }, (held) => held.remove(lock))).toBe('absent');
    expect(await readdir(dir.path())).toEqual([]);
  });
});
