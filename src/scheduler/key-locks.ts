// In-process mutual exclusion per key id: a key never has two rotations in flight in this daemon
// (its schedule tick, the sweep and a trigger can all want it at once). The backend lock
// (invariant 5) still guards across processes; this one keeps the daemon from contending with
// itself and from alerting about lock contention it caused.
//
// Schedule ticks and sweeps only try (a busy key is picked up again on the next check); a trigger
// waits its turn, and a waiting trigger goes before any later try, so a leak response is never
// starved by routine work.

export type ReleaseKey = () => void;

interface Waiter {
  grant: (release: ReleaseKey) => void;
}

export class KeyLocks {
  readonly #held = new Set<string>();
  readonly #waiters = new Map<string, Waiter[]>();

  /** Takes the key when it is free and nobody waits for it; undefined otherwise. */
  tryAcquire(keyId: string): ReleaseKey | undefined {
    if (this.#held.has(keyId) || (this.#waiters.get(keyId)?.length ?? 0) > 0) return undefined;
    this.#held.add(keyId);
    return this.#releaser(keyId);
  }

  /** Waits for the key (first come, first served); rejects with the signal's reason on abort. */
  acquire(keyId: string, signal?: AbortSignal): Promise<ReleaseKey> {
    const now = this.tryAcquire(keyId);
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
    return this.#held.has(keyId);
  }

  #releaser(keyId: string): ReleaseKey {
    let released = false;
    // Idempotent: a run releases each key when it is done and again, defensively, when the
    // whole run ends; the second call must not free a key someone else has taken since.
    return () => {
      if (released) return;
      released = true;
      const queue = this.#waiters.get(keyId);
      const next = queue?.shift();
      if (queue?.length === 0) this.#waiters.delete(keyId);
      if (next) {
        // Handed over without a gap: the key stays held, by its next owner.
        next.grant(this.#releaser(keyId));
      } else {
        this.#held.delete(keyId);
      }
    };
  }
}
