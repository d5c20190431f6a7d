// Issue 18, finding 4: the file backend's fence must hold for a writer paused between its token
// check and its rename for longer than the takeover guard's 30 s staleness. Any contender removes
// such a guard; the paused writer must then move nothing into place when it resumes, whatever the
// new holder stored meanwhile. The pause is injected at the rename itself (the test holds the
// one rename that would put the paused writer's value in place); the guard's age is set on the
// filesystem, not waited for.
import { readdir, stat, utimes } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { FileBackend } from '../../../src/backends/file/backend.ts';
import type { StoreTarget } from '../../../src/backends/types.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { createTestClock, makeRecord } from '../contract.ts';

/** The rename the test holds: the first one whose destination is `destination`, once armed. */
const held = vi.hoisted(() => ({
  destination: undefined as string | undefined,
  reached: (): void => undefined,
  gate: Promise.resolve(),
}));

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  return {
    ...real,
    rename: async (from: Parameters<typeof real.rename>[0], to: Parameters<typeof real.rename>[1]) => {
      if (held.destination !== undefined && to === held.destination) {
        held.destination = undefined;
        held.reached();
        await held.gate;
      }
      return real.rename(from, to);
    },
  };
});

const directory = useTempDir('keyroll-fence-pause-');

/** Arms the hold on the next rename to `destination`; resolves `reached` when the writer gets there. */
function holdRenameTo(destination: string): { reached: Promise<void>; resume: () => void } {
  let resume: () => void = () => undefined;
  held.gate = new Promise<void>((resolve) => {
    resume = resolve;
  });
  const reached = new Promise<void>((resolve) => {
    held.reached = resolve;
  });
  held.destination = destination;
  return { reached, resume };
}

/** Makes the takeover guard of `lockFile` look 31 s old, as if its holder had been paused that long. */
async function guardAgedPastStaleness(lockFile: string): Promise<void> {
  const guard = `${lockFile}.takeover`;
  const then = new Date(Date.now() - 31_000);
  const paths = (await stat(guard)).isDirectory()
    ? (await readdir(guard)).map((holder) => join(guard, holder))
    : [guard];
  for (const path of paths) await utimes(path, then, then);
}

describe('file backend: a fenced writer paused between its token check and its rename', () => {
  it('moves nothing into place once a new holder took the lock and wrote; its retry is refused KR_LOCK_LOST', async () => {
    const clock = createTestClock();
    const open = (): FileBackend =>
      new FileBackend('files', { kind: 'file', directory: directory.path() }, { now: clock.now });
    const t: StoreTarget = {
      path: 'keys/paused',
      shape: { format: 'raw', secretField: 'apiKey', fields: [] },
    };
    const file = join(directory.path(), 'keys/paused');
    const former = open();
    await former.writeSecret(t, makeRecord());
    const a = await former.acquireLock(t, { owner: 'former', rotationId: 'r-former', ttlMs: 1_000 });
    if (!a.acquired) throw new Error('expected the lock');

    // The former holder checks its token under the guard, then stalls right before its rename.
    const hold = holdRenameTo(file);
    const late = makeRecord();
    const lateWrite = former.writeSecret(t, late, { lock: a.lock });
    await hold.reached;

    // 31 s later by the filesystem, 2 s past the lock by keyroll's clock: a new holder takes over and writes.
    await guardAgedPastStaleness(`${file}.keyroll.lock`);
    clock.advance(2_000);
    const successor = open();
    const b = await successor.acquireLock(t, {
      owner: 'successor',
      rotationId: 'r-successor',
      ttlMs: 60_000,
    });
    expect(b).toMatchObject({ acquired: true, lock: { tookOver: true } });
    if (!b.acquired) return;
    const winner = makeRecord();
    await successor.writeSecret(t, winner, { lock: b.lock });

    // The former holder resumes: its rename finds nothing to move, and the new holder's secret stays.
    hold.resume();
    await expect(lateWrite).rejects.toMatchObject({ code: 'KR_BACKEND_UNAVAILABLE', retryable: true });
    expect((await successor.readSecret(t))?.secret.equals(winner.secret)).toBe(true);
    // The engine retries a retryable write: the retry sees the new holder's lock and is refused.
    await expect(former.writeSecret(t, late, { lock: a.lock })).rejects.toMatchObject({
      code: 'KR_LOCK_LOST',
      retryable: false,
    });
    expect((await successor.readSecret(t))?.secret.equals(winner.secret)).toBe(true);
    await successor.releaseLock(t, b.lock);
    // No copy of the refused secret is left on disk (temp files, drafts, holder directories).
    expect((await readdir(join(directory.path(), 'keys'))).sort()).toEqual([
      'paused',
      'paused.keyroll.current',
      'paused.keyroll.json',
      'paused.keyroll.previous',
    ]);
  });
});
