// In-process mutual exclusion per key id: a key never has two rotations in flight in this daemon
// (its schedule tick, the sweep and a trigger can all want it at once). The backend lock
// (invariant 5) still guards across processes; this one keeps the daemon from contending with
// itself and from alerting about lock contention it caused.
//
// Schedule ticks and sweeps only try (a busy key is picked up again on the next check); a trigger
// waits its turn, and a waiting trigger goes before any later try, so a leak response is never
// starved by routine work.
//
// A routine run over many keys reserves them all when it begins (a second tick or sweep finds them
// busy) but works through them a few at a time, so most of its holds have not started yet: a
// trigger (a leak) takes such a hold over at once instead of waiting behind the whole run, and the
// run skips that key when it reaches it (`Reservation.start` answers false). A hold whose key work
// has started is never taken over: the trigger waits for it.

export type ReleaseKey = () => void;

/** A hold taken before the key's work starts; `start` turns it into a hold nobody takes over. */
export interface Reservation {
  /** True when the hold is still this reservation's (now started); false when a trigger took it over. */
  start: () => boolean;
  release: ReleaseKey;
}

interface Hold {
  started: boolean;
  /** Released, or taken over by a trigger: its release no longer frees anything. */
  ended: boolean;
}

interface Waiter {
  grant: (release: ReleaseKey) => void;
}

export class KeyLocks {
  readonly #holds = new Map<string, Hold>();
  readonly #waiters = new Map<string, Waiter[]>();

  /** Takes the key when it is free and nobody waits for it; undefined otherwise. */
  tryAcquire(keyId: string): ReleaseKey | undefined {
    return this.#take(keyId, true);
  }

  /** Like tryAcquire, but a trigger may take the hold over until `start` is called. */
  reserve(keyId: string): Reservation | undefined {
    if (this.#busy(keyId)) return undefined;
    const hold: Hold = { started: false, ended: false };
    this.#holds.set(keyId, hold);
    return {
      start: () => {
        if (hold.ended) return false;
        hold.started = true;
        return true;
      },
      release: this.#releaser(keyId, hold),
    };
  }

  /**
   * Waits for the key (first come, first served), or takes over a reservation whose work has not
   * started; rejects with the signal's reason on abort.
   */
  acquire(keyId: string, signal?: AbortSignal): Promise<ReleaseKey> {
    const now = this.tryAcquire(keyId) ?? this.#takeOver(keyId);
    if (now) return Promise.resolve(now);
    return new Promise<ReleaseKey>((resolve, reject) => {
      if (signal?.aborted) {
        reject(signal.reason as Error);
        return;
      }
      const queue = this.#waiters.get(keyId) ?? [];
      const onAbort = (): void => {
        const index = queue.indexOf(waiter);
        if (index >= 0) queue.splice(index, 1);
        if (queue.length === 0) this.#waiters.delete(keyId);
        reject(signal?.reason as Error);
      };
      const waiter: Waiter = {
        grant: (release) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(release);
        },
      };
      queue.push(waiter);
      this.#waiters.set(keyId, queue);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  isHeld(keyId: string): boolean {
    return this.#holds.has(keyId);
  }

  #busy(keyId: string): boolean {
    return this.#holds.has(keyId) || (this.#waiters.get(keyId)?.length ?? 0) > 0;
  }

  #take(keyId: string, started: boolean): ReleaseKey | undefined {
    if (this.#busy(keyId)) return undefined;
    const hold: Hold = { started, ended: false };
    this.#holds.set(keyId, hold);
    return this.#releaser(keyId, hold);
  }

  /** The key passes from a reservation not yet started to a trigger, without a gap. */
  #takeOver(keyId: string): ReleaseKey | undefined {
    const current = this.#holds.get(keyId);
    if (current === undefined || current.started || (this.#waiters.get(keyId)?.length ?? 0) > 0)
      return undefined;
    current.ended = true;
    const hold: Hold = { started: true, ended: false };
    this.#holds.set(keyId, hold);
    return this.#releaser(keyId, hold);
  }

  #releaser(keyId: string, hold: Hold): ReleaseKey {
    // Idempotent: a run releases each key when it is done and again, defensively, when the
    // whole run ends; the second call must not free a key someone else has taken since (nor
    // does the release of a reservation a trigger took over).
    return () => {
      if (hold.ended) return;
      hold.ended = true;
      const queue = this.#waiters.get(keyId);
      const next = queue?.shift();
      if (queue?.length === 0) this.#waiters.delete(keyId);
      if (next) {
        // Handed over without a gap: the key stays held, by its next owner.
        const following: Hold = { started: true, ended: false };
        this.#holds.set(keyId, following);
        next.grant(this.#releaser(keyId, following));
      } else {
        this.#holds.delete(keyId);
      }
    };
  }
}
