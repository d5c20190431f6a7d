// Which writes this process has already attempted, so a backend can keep the first attempt of a
// rotation's write down to the write itself (invariant 2: nothing before it) and pay for the
// idempotency read (did an earlier attempt land?) only on a retry (invariant 8).
// In memory on purpose: the secret lives only in this process, so only this process can retry.

/** The (path, key) pairs this process has attempted to write; bounded, oldest forgotten first. */
export class AttemptLog {
  readonly #seen = new Set<string>();
  readonly #limit: number;

  constructor(limit = 4096) {
    this.#limit = limit;
  }

  /** Records an attempt; true when the same pair was attempted before. */
  record(path: string, key: string): boolean {
    const entry = `${path}\n${key}`;
    if (this.#seen.has(entry)) return true;
    this.#seen.add(entry);
    if (this.#seen.size > this.#limit) {
      const oldest = this.#seen.values().next().value;
      if (oldest !== undefined) this.#seen.delete(oldest);
    }
    return false;
  }
}
