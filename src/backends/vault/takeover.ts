// What a takeover of a Vault lock must do before anything else (invariant 9). The fence of a
// Vault write is a check-and-set against the data version read under the lock (write.ts), and the
// takeover itself writes only the lock entry: the version stays where it was, so a runner whose
// lock was taken over (paused, frozen, cut off) would still hold a base that matches. If it
// resumed before the new holder wrote, its write would land and the new holder's, against the
// same version, would be refused: the live secret stored nowhere.
// So the new holder writes the data again, unchanged, as the next version (an empty map where no
// live value exists), before it reads the state or rolls, and fences its own writes with that
// version. From then on every write fenced by an earlier holder is refused:
// - the copy lands by check-and-set against a version v read at time r, so v was still current
//   when it landed. An earlier holder read its base under its lock, before its lease ended (the
//   lock keeper proves the lease after that read, before each roll), so before the takeover and
//   before r: its base is at most v, and the copy made the data v + 1;
// - the copy is fenced the same way: v is read before this holder confirms, by reading the lock
//   entry, that it still holds the lock. A holder taken over between its lock write and that read
//   sees a token not its own and writes nothing; one paused between the confirmation and the copy
//   still holds a base older than the next holder's takeover, so its copy is refused once that
//   holder's copy landed, and before that it only moves the version the next holder reads.
// A version that is a copy is recorded as one (`keyroll_copied_version`, so readPrevious skips it)
// and attributed to the rotation that wrote the value it copies (the `last_write` keys), so
// recovery still recognises a finished write; an intent marker whose forecast names the copy's
// version loses the forecast first: the copy is not that rotation's write.
import { BackendError } from '../errors.ts';
import type { CustomMetadataPatch, KvV2 } from './kv.ts';
import type { HeldLock, LockInfo } from '../types.ts';
import { lockInfo, readLockEntry } from './lock.ts';
import { encodeIntent, META, readIntent, writerOf } from './records.ts';

/** Rounds of a copy that keeps losing its check-and-set to writers that landed in between. */
const COPY_ROUNDS = 5;

export type MetadataChange = (
  patch: (current: Record<string, string>) => CustomMetadataPatch,
) => Promise<void>;

/**
 * Writes the data of `path` again as its next version while the lock entry carries `held`'s token:
 * the version this holder's writes check-and-set against from now on, or `lostTo` the holder now
 * (taken over again meanwhile, or released: then this lock as it was). `changeMetadata` applies a
 * custom_metadata patch under this holder's lock.
 */
export async function moveVersionPastFormerHolder(
  kv: KvV2,
  path: string,
  held: HeldLock,
  changeMetadata: MetadataChange,
  backend: string,
): Promise<number | { lostTo: LockInfo }> {
  /** A forecast dropped in an earlier round: if its rotation's write got in before the copy, it still names that write. */
  let dropped: Forecast | undefined;
  for (let round = 0; round < COPY_ROUNDS; round++) {
    // Read before the confirmation below: the argument above needs the base older than it.
    const current = await kv.readData(path, 'lock');
    const entry = await readLockEntry(kv, path, 'lock');
    if (entry.lock?.token !== held.token)
      return {
        lostTo: lockInfo(entry) ?? {
          owner: held.owner,
          rotationId: held.rotationId,
          expiresAt: held.expiresAt,
        },
      };
    const base = current?.version ?? 0;
    const copyVersion = base + 1;
    // A marker that forecasts its write as the copy's version would claim the copy: drop the forecast.
    await changeMetadata((meta) => {
      const forecast = forecastOf(meta[META.intent]);
      if (forecast?.version !== copyVersion) return undefined;
      dropped = forecast;
      return { [META.intent]: forecast.withoutIt };
    });
    const written = await kv.writeData(path, current?.data ?? {}, base, 'lock');
    if (written === 'cas-mismatch') continue;
    const meta = current?.customMetadata ?? {};
    const writer = writerOf(meta, base) ?? (dropped?.version === base ? dropped.rotationId : undefined);
    // A copy of a copy names the version the first one copied: readPrevious skips them all at once.
    const original = copiedFrom(meta, base) ?? base;
    await changeMetadata(() => ({
      [META.copiedVersion]: JSON.stringify({ version: written.version, of: original }),
      ...(writer === undefined
        ? {}
        : { [META.lastWriteRotationId]: writer, [META.lastWriteVersion]: String(written.version) }),
    }));
    return written.version;
  }
  throw new BackendError(
    'KR_BACKEND_CONFLICT',
    `vault backend ${backend}: lock of ${path} taken over, but its data kept changing while keyroll moved its version on`,
    {
      backend,
      kind: 'vault',
      operation: 'lock',
      path,
    },
  );
}

/** The version `version` copies, when the latest takeover's copy is `version` (an unreadable record: none). */
export function copiedFrom(meta: Record<string, string>, version: number): number | undefined {
  try {
    const record = JSON.parse(meta[META.copiedVersion] ?? '') as { version?: unknown; of?: unknown };
    return record.version === version && typeof record.of === 'number' && record.of > 0 && record.of < version
      ? record.of
      : undefined;
  } catch {
    return undefined;
  }
}

interface Forecast {
  rotationId: string;
  version: number;
  /** The marker as it reads (readIntent), without the forecast. */
  withoutIt: string;
}

/** The version an intent marker says its rotation's write creates, if it says one. */
function forecastOf(marker: string | undefined): Forecast | undefined {
  const intent = marker === undefined ? undefined : readIntent({ [META.intent]: marker });
  if (intent === undefined || marker === undefined) return undefined;
  let version: unknown;
  try {
    version = (JSON.parse(marker) as { writeVersion?: unknown }).writeVersion;
  } catch {
    return undefined;
  }
  if (typeof version !== 'number') return undefined;
  return { rotationId: intent.rotationId, version, withoutIt: encodeIntent(intent) };
}
