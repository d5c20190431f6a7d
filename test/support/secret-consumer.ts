// A simulated consumer of a rotated secret, as a service reads one in production: it reads the
// value keyroll stored (the file backend's file) through a cache with a TTL, as external-secrets,
// the Secrets Store CSI driver, AWS's caching clients or Vault Agent do, and calls the API with
// it. It re-reads only when its copy is older than the TTL, never after a 401: the caches named
// above do not either, which is what makes a roll that kills the held value an outage.
// Shared by the consumer-outage benchmark (bench/consumers.ts, real clock) and its test
// (test/rotation/consumers.test.ts, a virtual clock); the clock is the caller's.
// The secret stays inside this object: it is never logged, returned or put into an error.
import { readFile } from 'node:fs/promises';
import { request, type Dispatcher } from 'undici';

export type CallResult = 'ok' | 'unauthorized' | 'rate-limited' | 'no-secret' | 'other';

export interface ConsumerOptions {
  /** Which population the consumer belongs to (single, alternating, …), for the tallies. */
  population: string;
  /** The stored value: the file backend's file for the entry. */
  file: string;
  /** The JSON field holding the secret (the value shape's secretField). */
  secretField: string;
  /** How long a value read from the file is used before the file is read again. */
  ttlMs: number;
  /** The emulator's base URL; the consumer lists one project with its secret as bearer. */
  apiUrl: string;
  /** The clock the TTL is measured on (the same one keyroll's due-ness runs on). */
  now: () => number;
  dispatcher?: Dispatcher;
}

export interface ConsumerTally {
  calls: number;
  ok: number;
  /** Calls answered 401: the consumer's secret was dead. */
  unauthorized: number;
  rateLimited: number;
  /** Calls not made: the file did not exist or held no secret yet. */
  noSecret: number;
  /** Any other answer or a transport error. */
  other: number;
  /** File reads (cache misses). */
  reads: number;
  /** Time from a first 401 to the next success, summed, on the consumer's clock. */
  outageMs: number;
  /** The longest such stretch. */
  longestOutageMs: number;
}

export function emptyTally(): ConsumerTally {
  return {
    calls: 0,
    ok: 0,
    unauthorized: 0,
    rateLimited: 0,
    noSecret: 0,
    other: 0,
    reads: 0,
    outageMs: 0,
    longestOutageMs: 0,
  };
}

export class Consumer {
  readonly options: ConsumerOptions;
  readonly tally: ConsumerTally = emptyTally();
  #cached: { secret: string; readAt: number } | undefined;
  #failingSince: number | undefined;

  constructor(options: ConsumerOptions) {
    this.options = options;
  }

  /**
   * Forgets the cached value: the next call reads the file again. What a service that listens to
   * keyroll's notice (a `webhook` consumer) does when the notice arrives.
   */
  dropCache(): void {
    this.#cached = undefined;
  }

  /** One call to the API with the cached secret (re-read first when the copy is older than the TTL). */
  async call(): Promise<CallResult> {
    const secret = await this.#secret();
    if (secret === undefined) {
      this.tally.noSecret++;
      return 'no-secret';
    }
    this.tally.calls++;
    const result = await this.#listOneProject(secret);
    this.#count(result);
    return result;
  }

  async #secret(): Promise<string | undefined> {
    const now = this.options.now();
    if (this.#cached !== undefined && now - this.#cached.readAt < this.options.ttlMs)
      return this.#cached.secret;
    this.tally.reads++;
    let text: string;
    try {
      text = await readFile(this.options.file, 'utf8');
    } catch {
      // Not written yet: no value to cache; the next call tries again.
      return undefined;
    }
    const value = (JSON.parse(text) as Record<string, unknown>)[this.options.secretField];
    if (typeof value !== 'string' || value === '') return undefined;
    this.#cached = { secret: value, readAt: now };
    return value;
  }

  async #listOneProject(secret: string): Promise<CallResult> {
    try {
      const response = await request(`${this.options.apiUrl}/v1/projects?limit=1`, {
        method: 'GET',
        headers: { authorization: `Bearer ${secret}` },
        ...(this.options.dispatcher ? { dispatcher: this.options.dispatcher } : {}),
      });
      await response.body.dump();
      if (response.statusCode === 200) return 'ok';
      if (response.statusCode === 401) return 'unauthorized';
      if (response.statusCode === 429) return 'rate-limited';
      return 'other';
    } catch {
      return 'other';
    }
  }

  #count(result: CallResult): void {
    const now = this.options.now();
    switch (result) {
      case 'ok':
        this.tally.ok++;
        if (this.#failingSince !== undefined) {
          const stretch = now - this.#failingSince;
          this.tally.outageMs += stretch;
          this.tally.longestOutageMs = Math.max(this.tally.longestOutageMs, stretch);
          this.#failingSince = undefined;
        }
        return;
      case 'unauthorized':
        this.tally.unauthorized++;
        this.#failingSince ??= now;
        return;
      case 'rate-limited':
        this.tally.rateLimited++;
        return;
      case 'no-secret':
        return;
      case 'other':
        this.tally.other++;
        return;
    }
  }
}

/** The tallies of many consumers added up, by population. */
export function tallyByPopulation(
  consumers: readonly Consumer[],
): Record<string, ConsumerTally & { consumers: number }> {
  const out: Record<string, ConsumerTally & { consumers: number }> = {};
  for (const consumer of consumers) {
    const sum = (out[consumer.options.population] ??= { ...emptyTally(), consumers: 0 });
    sum.consumers++;
    const t = consumer.tally;
    sum.calls += t.calls;
    sum.ok += t.ok;
    sum.unauthorized += t.unauthorized;
    sum.rateLimited += t.rateLimited;
    sum.noSecret += t.noSecret;
    sum.other += t.other;
    sum.reads += t.reads;
    sum.outageMs += t.outageMs;
    sum.longestOutageMs = Math.max(sum.longestOutageMs, t.longestOutageMs);
  }
  return out;
}
