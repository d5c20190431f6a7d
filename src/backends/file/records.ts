// keyroll's bookkeeping for one file destination, kept beside it in `<file>.keyroll.json`
// (written atomically like the value): the version counter, what the last write was (for
// idempotent retries), the intent marker, the last rotation (with the API key it stored: a
// two-slot entry's active slot), the last drift probe and the last failure.
// It holds no secret, only the SHA-256 digest of the last written one. Below the format, the
// bookkeeping operations of the backend: each changes only its own fields, under the sidecar guard.
import { mkdir, open, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { FailureRecord, Intent, KeyState, ProbeRecord, RotationRecord } from '../types.ts';
import { DIRECTORY_MODE, readTextIfExists, writeFileAtomic } from './atomic.ts';
import type { FileKnowledge } from './known.ts';
import { readLockInfo } from './lock.ts';
import { keepReplacedValue } from './previous.ts';
import { removeStaleGuard } from './stale-guard.ts';
import { readStoredValue, statIfExists } from './stored-value.ts';

const IsoTime = z.string().min(1);

export const FileIntent = z.object({
  rotationId: z.string(),
  keyId: z.string(),
  owner: z.string(),
  startedAt: IsoTime,
  /** Nobody clears the marker before this time (invariant 9); absent in markers of older keyrolls. */
  holdUntil: IsoTime.optional(),
  /** The marked rotation answers a leak (invariant 6); absent in markers of older keyrolls. */
  reason: z.string().optional(),
  /** The fingerprint of the value stored when a leak's marker was written (Intent.storedFingerprint). */
  storedFingerprint: z.string().optional(),
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
  if (!parsed.success)
    throw new SidecarCorruptError(`${sidecarPathFor(valuePath)} does not match the sidecar format`);
  return parsed.data;
}

/**
 * Read-modify-write of the sidecar under its guard file, so two writers never interleave: a
 * failure recorded by a runner without the key lock cannot drop the intent marker the lock
 * holder wrote a moment before (and `change` sees every field it does not own as it is now).
 */
export async function updateSidecar(
  valuePath: string,
  change: (current: Sidecar) => Sidecar,
): Promise<Sidecar> {
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

/** The sidecar after a durable write of `rotationId`'s secret (its digest): the next version. */
export function bumpVersion(sidecar: Sidecar, rotationId: string, digest: string): Sidecar {
  const version = sidecar.version + 1;
  return { ...sidecar, version, lastWrite: { rotationId, digest, version } };
}

/** What the bookkeeping operations work with: what the instance remembers between calls. */
export interface RecordsContext {
  known: FileKnowledge;
}

/**
 * Every sidecar change of the backend goes through here: it first records a write whose own sidecar
 * update failed, if the value file still holds that write's secret (not replaced meanwhile).
 */
export async function changeSidecar(
  context: RecordsContext,
  file: string,
  change: (current: Sidecar) => Sidecar,
): Promise<Sidecar> {
  const unrecorded = context.known.unrecordedWrite(file);
  const stillStored =
    unrecorded !== undefined &&
    (await readStoredValue(file, unrecorded.shape))?.secret.digest() === unrecorded.digest;
  const next = await updateSidecar(file, (current) => {
    const recorded =
      unrecorded !== undefined && stillStored && current.lastWrite?.digest !== unrecorded.digest;
    return change(recorded ? bumpVersion(current, unrecorded.rotationId, unrecorded.digest) : current);
  });
  context.known.sidecarCaughtUp(file, unrecorded);
  return next;
}

export async function setIntent(context: RecordsContext, file: string, intent: Intent): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
  // Before the roll, under the lock: the value this rotation may replace gets its second name,
  // so the write after the roll keeps it with no I/O before the write (invariant 2). Before
  // the sidecar update, whose directory fsync makes the link durable too. Best effort: the
  // step after the write runs again and reports a failure there.
  await keepReplacedValue(file).catch(() => undefined);
  await changeSidecar(context, file, (sidecar) => ({ ...sidecar, intent: { ...intent } }));
}

export async function clearIntent(context: RecordsContext, file: string, rotationId: string): Promise<void> {
  const sidecar = await readSidecar(file);
  if (sidecar.intent?.rotationId !== rotationId) return;
  // Re-checked under the sidecar guard, so an intent set meanwhile by another rotation stays.
  await changeSidecar(context, file, (current) => {
    if (current.intent?.rotationId !== rotationId) return current;
    const { intent: _cleared, ...rest } = current;
    return rest;
  });
}

export async function recordRotation(
  context: RecordsContext,
  file: string,
  rotation: RotationRecord,
  options: { clearIntent?: boolean },
): Promise<void> {
  await changeSidecar(context, file, (sidecar) => {
    // lastKeyId names the key this rotation stored; a record without one (a single key, an
    // older caller) leaves none, rather than the key of an earlier rotation.
    const { lastKeyId: _earlier, ...kept } = sidecar;
    const recorded: Sidecar = {
      ...kept,
      lastRotatedAt: rotation.rotatedAt,
      lastRotationId: rotation.rotationId,
      lastRotationVersion: rotation.version,
      ...(rotation.keyId === undefined ? {} : { lastKeyId: rotation.keyId }),
    };
    // Under the sidecar guard: an intent set meanwhile by another rotation stays.
    if (!options.clearIntent || recorded.intent?.rotationId !== rotation.rotationId) return recorded;
    const { intent: _cleared, ...rest } = recorded;
    return rest;
  });
}

export async function recordProbe(context: RecordsContext, file: string, probe: ProbeRecord): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
  // Only lastProbe changes, under the sidecar guard: the intent and the write record stay.
  await changeSidecar(context, file, (sidecar) => ({
    ...sidecar,
    lastProbe: { at: probe.at, result: probe.result },
  }));
}

export async function recordFailure(
  context: RecordsContext,
  file: string,
  failure: FailureRecord,
): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: DIRECTORY_MODE });
  // Only lastFailure changes, under the sidecar guard: the lock holder's intent stays.
  await changeSidecar(context, file, (sidecar) => ({ ...sidecar, lastFailure: { ...failure } }));
}

/** The key's state from the sidecar, the value file's existence and the lock file. */
export async function readState(file: string): Promise<KeyState> {
  const [existing, sidecar, lock] = await Promise.all([
    statIfExists(file),
    readSidecar(file),
    readLockInfo(file),
  ]);
  const state: KeyState = { exists: existing !== undefined };
  if (sidecar.lastRotatedAt !== undefined) state.lastRotatedAt = sidecar.lastRotatedAt;
  if (sidecar.lastRotationId !== undefined) state.lastRotationId = sidecar.lastRotationId;
  if (sidecar.lastKeyId !== undefined) state.lastKeyId = sidecar.lastKeyId;
  if (sidecar.lastProbe !== undefined) state.lastProbe = { ...sidecar.lastProbe };
  if (sidecar.intent !== undefined) state.intent = sidecar.intent;
  if (sidecar.lastFailure !== undefined) state.lastFailure = sidecar.lastFailure;
  if (lock !== undefined) state.lock = lock;
  return state;
}
