// "Have we seen this within the window?" for the leak intake, in memory and bounded: which
// scanner alerts (repository, alert number and action) already got their background job, and
// which ignored deliveries were already audited. A full table forgets its oldest entries first;
// only the scanner itself can fill it with distinct signed deliveries.
export class OncePerWindow {
  readonly #windowMs: number;
  readonly #capacity: number;
  /** key -> when it was first seen; Map order is the order of first sight. */
  readonly #seen = new Map<string, number>();

  constructor(windowMs: number, capacity: number) {
    this.#windowMs = windowMs;
    this.#capacity = capacity;
  }

  /** True the first time `key` comes within the window (it is remembered from now on); false after that. */
  first(key: string, nowMs: number): boolean {
    for (const [seenKey, at] of this.#seen) {
      if (nowMs - at < this.#windowMs) break;
      this.#seen.delete(seenKey);
    }
    if (this.#seen.has(key)) return false;
    this.#seen.set(key, nowMs);
    if (this.#seen.size > this.#capacity) {
      const oldest = this.#seen.keys().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
    return true;
  }

  /** Forgets `key` (its job was never started after all). */
  forget(key: string): void {
    this.#seen.delete(key);
  }
}
