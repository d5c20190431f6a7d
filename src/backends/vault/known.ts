// What the Vault backend knows about each path without asking the server again: what it last
// saw there or wrote itself. Each fact saves a request only where a check-and-set makes a wrong
// one harmless (the server refuses the write and the backend reads), or where this process holds
// the key lock and is the only writer that follows the lock protocol; otherwise it reads.
// The facts change only through the transitions below, each named for what just happened on the
// path (a preflight read, a lock taken, a secret written, ...), so what one event makes true or
// forgets is decided here, once, and never by an edit of a field elsewhere.
import type { KeyState } from '../types.ts';
import type { KnownMetadata, KvMetadata } from './kv.ts';
import type { HeldEntry, LockEntry } from './lock.ts';

/** What one backend instance knows of one path. */
export class PathKnowledge {
  /**
   * The version the path had when this process last looked (preflight, lock) or wrote: the
   * check-and-set value of the next write, so the write after the roll is one request
   * (invariant 2) and a write by anyone else in between is detected, never overwritten.
   */
  #expectedVersion: number | undefined;
  /** What this process last wrote, so a retried write can answer alreadyApplied. */
  #lastWrite: { rotationId: string; version: number } | undefined;
  /**
   * The lock this process holds on the path: the entry version its last lock write created, the
   * check-and-set base of its refresh and release, which then need no read first.
   */
  #heldLock: HeldEntry | undefined;
  /**
   * Preflight found nothing ever written at the path, so its lock entry most likely does not
   * exist either: the lock's first write goes against version 0 (create only) without a read.
   */
  #neverWritten = false;
  /**
   * Only while this process holds the lock: the metadata as it last read (right after taking the
   * lock) or wrote it, the base of its next custom_metadata change (checked by the server on
   * OpenBao; kv.ts reads afresh where the server cannot check).
   */
  #metadata: KnownMetadata | undefined;
  /**
   * The state read right after the lock was taken, for the one readState the engine makes next;
   * dropped by any change this process makes to the path before then (metadata, data, lock).
   */
  #stateAfterLock: KeyState | undefined;
  /** The data write this process's intent marker announced: its rotation and the version it creates. */
  #intendedWrite: { rotationId: string; version: number } | undefined;
  /**
   * The token of a lock this process learned it lost (a refresh found it taken over or released,
   * a fenced write was refused): a fenced write with it is refused with no request at all, and
   * stays refused (invariant 9). Kept past letting the lock go: that is when it matters.
   */
  #lostLockToken: string | undefined;

  /** The check-and-set version of the next data write, when known. */
  get expectedVersion(): number | undefined {
    return this.#expectedVersion;
  }

  /** The lock this process holds on the path, as its last lock write left the entry. */
  get heldLock(): HeldEntry | undefined {
    return this.#heldLock;
  }

  /** The entry holding the lock with `token`, when that is the lock this process holds. */
  heldEntryWith(token: string): HeldEntry | undefined {
    return this.#heldLock?.lock.token === token ? this.#heldLock : undefined;
  }

  /** True when this process learned that the lock with `token` is no longer its own. */
  hasLost(token: string): boolean {
    return this.#lostLockToken === token;
  }

  /** True when this process's last write to the path was the one of `rotationId`. */
  lastWroteFor(rotationId: string): boolean {
    return this.#lastWrite?.rotationId === rotationId;
  }

  /** True when this process's intent marker announced that the write of `rotationId` creates `version`. */
  markerAnnounced(rotationId: string, version: number): boolean {
    return this.#intendedWrite?.rotationId === rotationId && this.#intendedWrite.version === version;
  }

  /** Preflight read the path: its current version (undefined: nothing was ever written there). */
  preflightRead(version: number | undefined): void {
    this.#expectedVersion = version ?? 0;
    this.#neverWritten = version === undefined;
  }

  /**
   * A lock write is about to go: the entry it may write against without reading first, one whose
   * content at that version is certain: the lock this process holds (`refreshing` it), or none at
   * all on a path preflight found never written (version 0 only creates). The never-written hint is
   * used up: an entry seen or released since could have reached a version again holding someone
   * else's lock.
   */
  lockWriteStarting(refreshing: boolean): LockEntry | undefined {
    const base = refreshing
      ? this.#heldLock
      : this.#neverWritten
        ? { version: 0, lock: undefined }
        : undefined;
    this.#neverWritten = false;
    return base;
  }

  /**
   * A refresh of the lock this process holds was written against the entry it wrote itself, with no
   * read, while it knew the metadata: the lock never left it, so no other runner changed the path
   * since and what it knows of the path holds. False (nothing changed) otherwise.
   */
  refreshedUnread(entry: HeldEntry): boolean {
    if (this.#metadata === undefined) return false;
    this.refreshedLock(entry);
    return true;
  }

  /**
   * The lock this process holds was refreshed. The entry carried its token all along (a takeover
   * writes its own token), so what it knows of the path still holds; only the state read right
   * after the lock names the old expiry.
   */
  refreshedLock(entry: HeldEntry): void {
    this.#heldLock = entry;
    this.#stateAfterLock = undefined;
  }

  /** This process took the lock (new, or taken again): what was true under an earlier lock is forgotten. */
  tookLock(entry: HeldEntry): void {
    this.#letGoOfLock();
    this.#heldLock = entry;
  }

  /**
   * Right after taking the lock, the path's metadata was read under it: the version the write after
   * the roll checks-and-sets against, and the base of the bookkeeping changes.
   */
  readUnderLock(metadata: KvMetadata | undefined): void {
    this.#expectedVersion = metadata?.currentVersion ?? 0;
    this.#metadata = { metadata };
  }

  /** A takeover wrote the data again as `version` (takeover.ts): this holder's writes check-and-set against it. */
  movedVersionPastFormerHolder(version: number): void {
    this.#expectedVersion = version;
  }

  /** The state as read under the lock just taken, kept for the engine's next readState. */
  stateReadUnderLock(state: KeyState): void {
    this.#stateAfterLock = state;
  }

  /** The engine's readState right after the lock: the state read under it, once (undefined: read the server). */
  takeStateReadUnderLock(): KeyState | undefined {
    const state = this.#stateAfterLock;
    this.#stateAfterLock = undefined;
    return state;
  }

  /** This process is releasing the lock with `token`: the entry it holds it in, if it does, and let go of it. */
  releasingLock(token: string): HeldEntry | undefined {
    const entry = this.heldEntryWith(token);
    if (entry !== undefined) this.#letGoOfLock();
    return entry;
  }

  /** Forgets what was true only under the lock: another runner may change the path from now on. */
  #letGoOfLock(): void {
    this.#heldLock = undefined;
    this.#metadata = undefined;
    this.#stateAfterLock = undefined;
    this.#intendedWrite = undefined;
  }

  /** This process no longer holds the lock with `token`: forget what was true under it, and remember the loss. */
  lostLock(token: string): void {
    if (this.#heldLock === undefined || this.#heldLock.lock.token === token) this.#letGoOfLock();
    this.#lostLockToken = token;
  }

  /**
   * An intent marker is about to be written: the version the write after the roll will create (the
   * check-and-set version plus one), when known; the write an earlier marker announced is forgotten.
   */
  markingIntent(): number | undefined {
    const writeVersion = this.#expectedVersion === undefined ? undefined : this.#expectedVersion + 1;
    this.#intendedWrite = undefined;
    return writeVersion;
  }

  /** The intent marker of `rotationId` is durable and announces that its write creates `version`. */
  markedIntent(rotationId: string, version: number): void {
    this.#intendedWrite = { rotationId, version };
  }

  /** A data write is about to go: the state read under the lock no longer holds once the data changes (or may have). */
  writingData(): void {
    this.#stateAfterLock = undefined;
  }

  /** An unfenced write lost its check-and-set: the version is no longer known, and a retry reads afresh. */
  unfencedWriteRefused(): void {
    this.#expectedVersion = undefined;
  }

  /** The secret of `rotationId` landed as `version`. */
  wroteSecret(rotationId: string, version: number): void {
    this.#expectedVersion = version;
    this.#lastWrite = { rotationId, version };
  }

  /** A read found the secret of an earlier attempt of this write at `version` (its answer was lost). */
  foundWriteApplied(version: number): void {
    this.#expectedVersion = version;
  }

  /**
   * A custom_metadata change is about to go: the metadata it may start from (while the lock is
   * held), and both it and the state read under the lock are forgotten until the change is done.
   */
  changingMetadata(): KnownMetadata | undefined {
    const base = this.#metadata;
    this.#metadata = undefined;
    this.#stateAfterLock = undefined;
    return base;
  }

  /** A custom_metadata change left `after`: remembered while this process still holds the lock. */
  changedMetadata(after: KnownMetadata): void {
    // Only while this process holds the lock (it took or refreshed it and has not let go).
    if (this.#heldLock !== undefined) this.#metadata = after;
  }
}

/** Per-path knowledge of one backend instance (one server, one token source). */
export class PathKnowledgeMap {
  readonly #paths = new Map<string, PathKnowledge>();

  of(path: string): PathKnowledge {
    let known = this.#paths.get(path);
    if (known === undefined) {
      known = new PathKnowledge();
      this.#paths.set(path, known);
    }
    return known;
  }
}
