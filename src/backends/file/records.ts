// keyroll's bookkeeping for one file destination, kept beside it in `<file>.keyroll.json`
// (written atomically like the value): the version counter, what the last write was (for
// idempotent retries), the intent marker, the last rotation (with the API key it stored: a
// two-slot entry's active slot), the last drift probe and the last failure.
// It holds no secret, only the SHA-256 digest of the last written one.
import { open, unlink } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { readTextIfExists, writeFileAtomic } from './atomic.ts';
import { removeStaleGuard } from './stale-guard.ts';

const IsoTime = z.string().min(1);

export const FileIntent = z.object({
  rotationId: z.string(),
  keyId: z.string(),
  owner: z.string(),
  startedAt: IsoTime,
  /** Nobody clears the marker before this time (invariant 9); absent in markers of older keyrolls. */
  holdUntil: IsoTime.optional(),
});

export const FileFailure = z.object({
  rotationId: z.string(),
  step: z.string(),
  errorCode: z.string(),
  at: IsoTime,
  // The failure streak (backoff and quarantine); absent in sidecars of older keyrolls.
  consecutive: z.number().int().nonnegative().optional(),
  firstAt: IsoTime.optional(),
  nextAttemptAt: IsoTime.optional(),
  quarantinedAt: IsoTime.optional(),
  lastAlertedAt: IsoTime.optional(),
});

// Tolerant (extra fields kept out, not rejected): a newer keyroll may add fields, and an older
// one reading the file must still find what it knows.
export const FileProbe = z.object({
  at: IsoTime,
  result: z.enum(['works', 'dead']),
});

export const Sidecar = z.object({
  /** Incremented on every value write; the file backend's version id. */
  version: z.number().int().nonnegative().default(0),
  lastWrite: z
    .object({
      rotationId: z.string(),
      /** SHA-256 hex of the secret written, to tell our write from a hand edit. */
      digest: z.string(),
      version: z.number().int().nonnegative(),
    })
    .optional(),
  intent: FileIntent.optional(),
  lastRotatedAt: IsoTime.optional(),
  lastRotationId: z.string().optional(),
  lastRotationVersion: z.string().optional(),
  /** The API key whose secret the last rotation stored (invariant 10); absent in older sidecars. */
  lastKeyId: z.string().optional(),
  lastProbe: FileProbe.optional(),
  lastFailure: FileFailure.optional(),
});
export type Sidecar = z.infer<typeof Sidecar>;

export function sidecarPathFor(valuePath: string): string {
  return `${valuePath}.keyroll.json`;
}

export class SidecarCorruptError extends Error {
  override name = 'SidecarCorruptError';
}

/** The sidecar of `valuePath`, or an empty one when none exists. */
export async function readSidecar(valuePath: string): Promise<Sidecar> {
  const text = await readTextIfExists(sidecarPathFor(valuePath));
  if (text === undefined) return Sidecar.parse({});
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new SidecarCorruptError(`${sidecarPathFor(valuePath)} is not JSON`);
  }
  const parsed = Sidecar.safeParse(raw);
  if (!parsed.success) throw new SidecarCorruptError(`${sidecarPathFor(valuePath)} does not match the sidecar format`);
  return parsed.data;
}

/**
 * Read-modify-write of the sidecar under its guard file, so two writers never interleave: a
 * failure recorded by a runner without the key lock cannot drop the intent marker the lock
 * holder wrote a moment before (and `change` sees every field it does not own as it is now).
 */
export async function updateSidecar(valuePath: string, change: (current: Sidecar) => Sidecar): Promise<Sidecar> {
  return withSidecarGuard(valuePath, async () => {
    const next = change(await readSidecar(valuePath));
    await writeFileAtomic(sidecarPathFor(valuePath), `${JSON.stringify(next, null, 2)}\n`);
    return next;
  });
}

export function sidecarGuardPathFor(valuePath: string): string {
  return `${sidecarPathFor(valuePath)}.guard`;
}

// The guard lives for one read and one atomic write; one left by a crash is removed after 30 s
// (stale-guard.ts).
// How long a writer waits for another's guard before giving up (a retryable EBUSY).
const GUARD_WAIT_MS = 5_000;

async function withSidecarGuard<T>(valuePath: string, body: () => Promise<T>): Promise<T> {
  const guard = sidecarGuardPathFor(valuePath);
  const started = Date.now();
  for (let delay = 2; ; delay = Math.min(delay * 2, 100)) {
    try {
      // O_EXCL: exactly one writer creates it; an empty file is enough.
      await (await open(guard, 'wx', 0o600)).close();
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (await removeStaleGuard(guard)) continue;
    if (Date.now() - started > GUARD_WAIT_MS) {
      throw Object.assign(new Error(`${guard} is held by another writer`), { code: 'EBUSY' });
    }
    await sleep(delay);
  }
  try {
    return await body();
  } finally {
    await unlink(guard).catch(() => undefined);
  }
}
