// keyroll's bookkeeping for one file destination, kept beside it in `<file>.keyroll.json`
// (written atomically like the value): the version counter, what the last write was (for
// idempotent retries), the intent marker, the last rotation and the last failure.
// It holds no secret, only the SHA-256 digest of the last written one.
import { z } from 'zod';
import { readTextIfExists, writeFileAtomic } from './atomic.ts';

const IsoTime = z.string().min(1);

export const FileIntent = z.object({
  rotationId: z.string(),
  keyId: z.string(),
  owner: z.string(),
  startedAt: IsoTime,
});

export const FileFailure = z.object({
  rotationId: z.string(),
  step: z.string(),
  errorCode: z.string(),
  at: IsoTime,
});

// Tolerant (extra fields kept out, not rejected): a newer keyroll may add fields, and an older
// one reading the file must still find what it knows.
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

/** Read-modify-write of the sidecar. Callers hold the key lock, so writers do not interleave. */
export async function updateSidecar(valuePath: string, change: (current: Sidecar) => Sidecar): Promise<Sidecar> {
  const next = change(await readSidecar(valuePath));
  await writeFileAtomic(sidecarPathFor(valuePath), `${JSON.stringify(next, null, 2)}\n`);
  return next;
}
