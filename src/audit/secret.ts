import { createHash } from 'node:crypto';
import { inspect } from 'node:util';
import { pinSecretValue, registerSecretValue } from './sanitize.ts';

const HIDDEN = '[Secret]';

/**
 * A secret value that never prints itself (invariant 3). String(), template literals,
 * JSON.stringify and util.inspect all show `[Secret]`; the value comes out only through
 * `reveal()`, which only backend writes and the API probe call. Constructing one registers
 * the value with the sanitizer, so even an accidental copy is blanked from logs and alerts:
 * inside a rotation's secret scope until the rotation ends, else in a bounded set (oldest
 * evicted first). Long-lived credentials say so with `pinned()`.
 */
export class Secret {
  readonly #value: string;

  constructor(value: string) {
    this.#value = value;
    registerSecretValue(value);
  }

  /**
   * Marks the value as a long-lived credential (trigger key, bearer token, Vault or OAuth token):
   * the sanitizer keeps blanking it for `lifetimeMs` (for good when not given), however many
   * other secrets come and go. Returns this Secret.
   */
  pinned(lifetimeMs?: number): this {
    pinSecretValue(this.#value, lifetimeMs);
    return this;
  }

  /** The plaintext. Call sites are few and reviewed: backend writes and the stored-secret probe. */
  reveal(): string {
    return this.#value;
  }

  /** A short, non-reversible fingerprint safe for logs: the first 12 hex chars of SHA-256. */
  fingerprint(): string {
    return sha256Hex(this.#value).slice(0, 12);
  }

  /** Full SHA-256 hex digest, used to compare a read-back with what was written. */
  digest(): string {
    return sha256Hex(this.#value);
  }

  equals(other: Secret): boolean {
    return this.#value === other.#value;
  }

  toString(): string {
    return HIDDEN;
  }

  toJSON(): string {
    return HIDDEN;
  }

  [inspect.custom](): string {
    return HIDDEN;
  }

  get [Symbol.toStringTag](): string {
    return 'Secret';
  }
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}
