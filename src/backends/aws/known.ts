// What this backend instance learned from its own calls, so it can skip a request whose answer it
// already knows. Two kinds, trusted differently:
// - Hints (TargetHints): what the target looked like when this process last described it (exists,
//   has a value, carries its own lock). They choose which call to try first (CreateSecret or
//   TagResource / PutSecretValue, lock create or lock read) and where the lock lives (lock/lock.ts); each
//   call is atomic and refuses a wrong guess, so a stale hint costs a request, never correctness.
//   One guess needs a recent description: the first lock put on the target (lock/target.ts) is sent
//   only on a description less than an hour old that saw no lock there.
// - Facts under the lock (HeldFacts): the lock this process holds on a target and the intent
//   marker it wrote or read there while holding it. Only a runner holding the key's lock writes
//   the marker, and another runner takes the lock over only past its expiry (invariant 5), so
//   until then both facts stay true without reading them again (before its expiry the lock is
//   taken over only from a holder proven dead, LockRequest.deadOwners: a process that no longer
//   runs; one that runs after all, a force-deleted pod's, is fenced as write-fenced.ts says of a
//   runner paused between its check and its move). They are trusted only while the
//   lock has a margin left (runners' clocks and the requests' own latency), and dropped on
//   release, on any failed or refreshed acquire, and on any intent change whose outcome is unknown.
//   A third fact, the version AWSCURRENT was on when this process read the target under the lock,
//   is the compare-and-swap base of a fenced write (write-fenced.ts); it is only ever an expectation AWS
//   checks, so a stale one costs a refused move and a read, never a wrong write.
//   refreshLock keeps all three: the lock stayed ours without a gap (its CAS moved from our version).
// In memory only: a new process knows nothing and reads everything.
import type { HeldLock } from '../types.ts';
import { secretNameOf } from './target.ts';

/** What a description of the target said, as the lock decides on it (lock/lock.ts). */
export interface TargetSeen {
  exists: boolean;
  /** Some version carries AWSCURRENT: the lock lives on the target itself (else in its companion). */
  hasValue: boolean;
  /** Some version carries KEYROLL_LOCK: the target's own lock exists (and its companion is sealed). */
  lockOnTarget: boolean;
}

/** How old a description may be for the lock to decide on it without describing the target again. */
const RECENT_MS = 60 * 60_000;

/** What each target looked like when this process last described it; hints only (see above). */
export class TargetHints {
  readonly #seen = new Map<string, { seen: TargetSeen; atMs: number }>();
  readonly #now: () => Date;

  constructor(now: () => Date) {
    this.#now = now;
  }

  /** A description of the target (or its absence) came back. */
  described(path: string, seen: TargetSeen): void {
    this.#seen.set(path, { seen, atMs: this.#now().getTime() });
  }

  /** A value was written to the target (it exists and has a value now); its labels were not seen. */
  wroteValue(path: string): void {
    this.#update(path, { exists: true, hasValue: true });
  }

  /** The target was tagged or created by a bookkeeping change: it exists now. */
  madeExist(path: string): void {
    this.#update(path, { exists: true });
  }

  #update(path: string, change: Partial<TargetSeen>): void {
    const last = this.#seen.get(path);
    // A change is not a description: it keeps the time of the last one (no time: never recent).
    this.#seen.set(path, {
      seen: { exists: false, hasValue: false, lockOnTarget: false, ...last?.seen, ...change },
      atMs: last?.atMs ?? Number.NEGATIVE_INFINITY,
    });
  }

  /** True when the last description found nothing at `path`; false when it found a secret or none was made. */
  likelyMissing(path: string): boolean {
    return this.#seen.get(path)?.seen.exists === false;
  }

  likelyExists(path: string): boolean {
    return this.#seen.get(path)?.seen.exists === true;
  }

  /** The target as last described, when that was less than an hour ago; else undefined (describe it). */
  recent(path: string): TargetSeen | undefined {
    const last = this.#seen.get(path);
    return last !== undefined && this.#now().getTime() - last.atMs < RECENT_MS ? last.seen : undefined;
  }
}

/**
 * A lock must have this much life left for its facts to be trusted: a quarter of its TTL, at most a
 * minute. The lock itself already assumes runners' clocks agree well within its TTL.
 */
function trustMarginMs(ttlMs: number): number {
  return Math.min(60_000, Math.floor(ttlMs / 4));
}

/** What the intent marker names: a rotation id, or null for no marker. */
type KnownIntent = string | null;

/** The version AWSCURRENT was on, or null for a target without one (missing, or created empty). */
type KnownCurrent = string | null;

interface Held {
  /** The exact target path the facts are about (a name and an ARN of one secret share a lock). */
  path: string;
  lock: HeldLock;
  marginMs: number;
  /** undefined: not known (never read under this lock, or an intent change is in flight or failed). */
  intent?: KnownIntent;
  /** undefined: not read under this lock. */
  current?: KnownCurrent;
  /** Bumped by every intent change this process starts, so a read that raced one is not kept. */
  generation: number;
}

/** The facts this process holds per key lock (keyed by the secret's name: a name and an ARN of one secret share a lock). */
export class HeldFacts {
  readonly #byLock = new Map<string, Held>();
  /** Locks given back with a finish record (lock/lock.ts), until the caller's releaseLock for them. */
  readonly #givenBack = new Set<string>();
  readonly #now: () => Date;

  constructor(now: () => Date) {
    this.#now = now;
  }

  /** A lock was acquired (or refreshed): start over with only the lock known. */
  hold(path: string, lock: HeldLock, ttlMs: number): void {
    this.#byLock.set(secretNameOf(path), { path, lock, marginMs: trustMarginMs(ttlMs), generation: 0 });
  }

  /**
   * The lock was extended by refreshLock (a CAS from the version this process held, so no other
   * runner held it in between): the facts known under it stay. A lock this process knew nothing
   * about starts over with only the lock known.
   */
  refresh(path: string, lock: HeldLock, ttlMs: number): void {
    const held = this.#byLock.get(secretNameOf(path));
    if (held?.path !== path || held.lock.owner !== lock.owner || held.lock.rotationId !== lock.rotationId) {
      this.hold(path, lock, ttlMs);
      return;
    }
    held.lock = lock;
    held.marginMs = trustMarginMs(ttlMs);
  }

  /**
   * True when this process holds `lock` (same owner and rotation) on `path` with its margin left:
   * no other runner can have taken it over (invariant 5), so a fenced write needs no lock read.
   */
  holds(path: string, lock: { owner: string; rotationId: string }): boolean {
    const held = this.#trusted(path);
    return held?.lock.owner === lock.owner && held.lock.rotationId === lock.rotationId;
  }

  /** The AWSCURRENT version read (or written) under the lock this process holds with margin left. */
  current(path: string): KnownCurrent | undefined {
    return this.#trusted(path)?.current;
  }

  /**
   * Before reading the target's versions: returns a function that keeps what AWSCURRENT was on,
   * when the lock is still the one held (with margin) at the time of the read.
   */
  observeCurrent(path: string): (current: KnownCurrent) => void {
    const held = this.#trusted(path);
    if (held === undefined) return () => undefined;
    return (current) => {
      if (this.#trusted(path) === held) held.current = current;
    };
  }

  /**
   * Forgets the lock on `path` (and all known under it) when it was taken for `request`: before its
   * release, or after a refresh that was refused or whose outcome is unknown (the lock may be lost).
   */
  dropIfFor(path: string, request: { owner: string; rotationId: string }): void {
    const name = secretNameOf(path);
    const held = this.#byLock.get(name);
    if (held?.lock.owner === request.owner && held.lock.rotationId === request.rotationId)
      this.#byLock.delete(name);
  }

  /**
   * `lock` was given back with a record on the target (lock/lock.ts): nothing known under it is kept,
   * and the caller's releaseLock (and any refresh before it) sends nothing for it.
   */
  released(path: string, lock: { owner: string; rotationId: string }): void {
    this.dropIfFor(path, lock);
    this.#givenBack.add(givenBackKey(path, lock));
  }

  /** True once for a lock given back with a record: its releaseLock sends nothing. */
  takeReleased(path: string, lock: { owner: string; rotationId: string }): boolean {
    return this.#givenBack.delete(givenBackKey(path, lock));
  }

  /** True while a lock given back with a record waits for its releaseLock (a refresh then sends nothing). */
  wasReleased(path: string, lock: { owner: string; rotationId: string }): boolean {
    return this.#givenBack.has(givenBackKey(path, lock));
  }

  /** The lock this process holds on `path`, while it has its margin left; else undefined. */
  lock(path: string): HeldLock | undefined {
    return this.#trusted(path)?.lock;
  }

  /** What the intent marker on `path` names, when known under a lock with its margin left. */
  intent(path: string): KnownIntent | undefined {
    return this.#trusted(path)?.intent;
  }

  /**
   * Before an intent change: the marker is unknown until `settle` says what it became. Returns the
   * settle function; a change that throws never settles, so the marker stays unknown.
   */
  changeIntent(path: string): (intent: KnownIntent) => void {
    const held = this.#byLock.get(secretNameOf(path));
    if (held === undefined) return () => undefined;
    held.intent = undefined;
    held.generation += 1;
    // The same secret under another spelling: nothing known about either spelling's marker.
    if (held.path !== path) return () => undefined;
    const generation = held.generation;
    return (intent) => {
      if (this.#byLock.get(secretNameOf(path)) === held && held.generation === generation)
        held.intent = intent;
    };
  }

  /**
   * Before reading the marker: returns a function that keeps what was read, unless the lock changed
   * or an intent change started meanwhile (the read may predate it).
   */
  observeIntent(path: string): (intent: KnownIntent) => void {
    const held = this.#trusted(path);
    if (held === undefined) return () => undefined;
    const generation = held.generation;
    return (intent) => {
      if (
        this.#byLock.get(secretNameOf(path)) === held &&
        held.generation === generation &&
        this.#trusted(path) === held
      )
        held.intent = intent;
    };
  }

  #trusted(path: string): Held | undefined {
    const held = this.#byLock.get(secretNameOf(path));
    if (held?.path !== path) return undefined;
    const left = Date.parse(held.lock.expiresAt) - this.#now().getTime();
    return left > held.marginMs ? held : undefined;
  }
}

function givenBackKey(path: string, lock: { owner: string; rotationId: string }): string {
  return `${secretNameOf(path)}\n${lock.owner}\n${lock.rotationId}`;
}
