// What the Vault backend knows about each path without asking the server again: what it last
// saw there or wrote itself. Each fact saves a request only where a check-and-set makes a wrong
// one harmless (the server refuses the write and the backend reads), or where this process holds
// the key lock and is the only writer that follows the lock protocol; otherwise it reads.
import type { KeyState } from '../types.ts';
import type { KnownMetadata } from './kv.ts';
import type { HeldEntry } from './lock.ts';

export interface PathKnowledge {
  /**
   * The version the path had when this process last looked (preflight, lock) or wrote: the
   * check-and-set value of the next write, so the write after the roll is one request
   * (invariant 2) and a write by anyone else in between is detected, never overwritten.
   */
  expectedVersion?: number;
  /** What this process last wrote, so a retried write can answer alreadyApplied. */
  lastWrite?: { rotationId: string; version: number };
  /**
   * The lock this process holds on the path: the entry version its last lock write created, the
   * check-and-set base of its refresh and release, which then need no read first.
   */
  heldLock?: HeldEntry;
  /**
   * Preflight found nothing ever written at the path, so its lock entry most likely does not
   * exist either: the lock's first write goes against version 0 (create only) without a read.
   */
  neverWritten?: boolean;
  /**
   * Only while this process holds the lock: the metadata as it last read (right after taking the
   * lock) or wrote it, the base of its next custom_metadata change (checked by the server on
   * OpenBao; kv.ts reads afresh where the server cannot check).
   */
  metadata?: KnownMetadata;
  /**
   * The state read right after the lock was taken, for the one readState the engine makes next;
   * dropped by any change this process makes to the path before then (metadata, data, lock).
   */
  stateAfterLock?: KeyState;
  /** The data write this process's intent marker announced: its rotation and the version it creates. */
  intendedWrite?: { rotationId: string; version: number };
  /**
   * The token of a lock this process learned it lost (a refresh found it taken over or released,
   * a fenced write was refused): a fenced write with it is refused with no request at all, and
   * stays refused (invariant 9). Kept past lockLetGo: that is when it matters.
   */
  lostLockToken?: string;
}

/** Per-path knowledge of one backend instance (one server, one token source). */
export class PathKnowledgeMap {
  readonly #paths = new Map<string, PathKnowledge>();

  of(path: string): PathKnowledge {
    let known = this.#paths.get(path);
    if (known === undefined) {
      known = {};
      this.#paths.set(path, known);
    }
    return known;
  }

  /** True while this process holds the lock of `path` (it took or refreshed it and has not let go). */
  holdsLock(path: string): boolean {
    return this.#paths.get(path)?.heldLock !== undefined;
  }

  /** Forgets what was true only under the lock: another runner may change the path from now on. */
  lockLetGo(path: string): void {
    const known = this.of(path);
    delete known.heldLock;
    delete known.metadata;
    delete known.stateAfterLock;
    delete known.intendedWrite;
  }

  /** This process no longer holds the lock with `token`: forget what was true under it, and remember the loss. */
  lockLost(path: string, token: string): void {
    const known = this.of(path);
    if (known.heldLock === undefined || known.heldLock.lock.token === token) this.lockLetGo(path);
    known.lostLockToken = token;
  }
}
