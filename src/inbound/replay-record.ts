// The replay record of the signed endpoints: every accepted (caller, id) until its timestamp
// leaves the sender's window (the trigger's callers; the leak intake as intake:github and
// intake:gitguardian), kept in a small file in the daemon's state directory and fsynced before the
// request is answered or any rotation starts. A restarted daemon reads it back, so a request
// captured on the wire is refused after a restart as it was before (409), not replayed into a
// second rotation of every key it named.
//
// When the file is missing or unreadable (first start, a volume that did not survive, damage),
// the daemon cannot know what its predecessor accepted: it then refuses every request signed
// before it started (`notBefore`), which costs a legitimate caller at most a re-signed retry.
import { randomUUID } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { KeyrollError } from '../errors.ts';

export const REPLAY_RECORD_FILE = 'trigger-replay.json';
/** Live entries at most: 10,000 accepted triggers within five minutes is abuse by a key holder, not use. */
export const DEFAULT_REPLAY_CAPACITY = 10_000;

const RecordFile = z.strictObject({
  version: z.literal(1),
  notBefore: z.number().int().nonnegative(),
  entries: z.array(z.tuple([z.string(), z.string(), z.number().int()])),
});
type RecordFile = z.infer<typeof RecordFile>;

export class ReplayRecordError extends KeyrollError {
  override name = 'ReplayRecordError';
  readonly dir: string;
  constructor(dir: string, message: string, cause?: unknown) {
    super('KR_REPLAY_RECORD', message, { cause });
    this.dir = dir;
  }
}

/** claimed: first sight, durably recorded. replay: seen before, or signed before the record began. full: at capacity. */
export type ReplayClaim = 'claimed' | 'replay' | 'signed-before-start' | 'full';

/** How the record was found at open: read back, absent (first start), or unreadable (started afresh). */
export type ReplayRecordOrigin = 'loaded' | 'new' | 'unreadable';

export class ReplayRecord {
  readonly dir: string;
  readonly origin: ReplayRecordOrigin;
  readonly #file: string;
  readonly #capacity: number;
  readonly #notBefore: number;
  /** caller + '\n' + nonce -> unix seconds after which the staleness check refuses it anyway. */
  readonly #seen: Map<string, number>;
  #writes: Promise<void> = Promise.resolve();

  private constructor(dir: string, origin: ReplayRecordOrigin, notBefore: number, seen: Map<string, number>, capacity: number) {
    this.dir = dir;
    this.origin = origin;
    this.#file = join(dir, REPLAY_RECORD_FILE);
    this.#notBefore = notBefore;
    this.#seen = seen;
    this.#capacity = capacity;
  }

  /** Reads the record in `dir` (created 0700 when missing) and writes it back at once, proving the directory writable. */
  static async open(dir: string, nowSeconds: number, capacity = DEFAULT_REPLAY_CAPACITY): Promise<ReplayRecord> {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    } catch (error) {
      throw new ReplayRecordError(dir, `cannot create the state directory ${dir}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`, error);
    }
    let origin: ReplayRecordOrigin;
    let parsed: RecordFile | undefined;
    try {
      const result = RecordFile.safeParse(JSON.parse(await readFile(join(dir, REPLAY_RECORD_FILE), 'utf8')));
      origin = result.success ? 'loaded' : 'unreadable';
      parsed = result.data;
    } catch (error) {
      origin = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'new' : 'unreadable';
    }
    const seen = new Map<string, number>();
    for (const [caller, nonce, expiresAt] of parsed?.entries ?? []) if (expiresAt >= nowSeconds) seen.set(`${caller}\n${nonce}`, expiresAt);
    const record = new ReplayRecord(dir, origin, parsed?.notBefore ?? nowSeconds, seen, capacity);
    await record.#persist();
    return record;
  }

  get size(): number {
    return this.#seen.size;
  }

  /**
   * Records (caller, nonce) unless seen before, until `windowSeconds` after `timestamp` (past
   * that the sender's staleness check refuses it anyway); resolves once the record is on disk. Throws
   * ReplayRecordError when it cannot be written: the request must then be refused, since a
   * restart would forget it.
   */
  async claim(caller: string, nonce: string, timestamp: number, nowSeconds: number, windowSeconds: number): Promise<ReplayClaim> {
    if (timestamp < this.#notBefore) return 'signed-before-start';
    for (const [id, expiresAt] of this.#seen) if (expiresAt < nowSeconds) this.#seen.delete(id);
    const id = `${caller}\n${nonce}`;
    // Checked and set before the first await: a duplicate arriving while this one is written is a replay.
    if (this.#seen.has(id)) return 'replay';
    if (this.#seen.size >= this.#capacity) return 'full';
    this.#seen.set(id, timestamp + windowSeconds);
    try {
      await this.#persist();
    } catch (error) {
      this.#seen.delete(id);
      throw error;
    }
    return 'claimed';
  }

  /** Writes are serialized; each writes the whole (small) record to a temp file, fsyncs, renames, fsyncs the directory. */
  #persist(): Promise<void> {
    const write = this.#writes.then(() => this.#writeNow());
    this.#writes = write.catch(() => undefined);
    return write;
  }

  async #writeNow(): Promise<void> {
    const content: RecordFile = {
      version: 1,
      notBefore: this.#notBefore,
      entries: [...this.#seen].map(([id, expiresAt]) => {
        const [caller = '', nonce = ''] = id.split('\n');
        return [caller, nonce, expiresAt];
      }),
    };
    const temp = join(this.dir, `.${REPLAY_RECORD_FILE}.${randomUUID()}`);
    try {
      const handle = await open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify(content)}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, this.#file);
      const dir = await open(this.dir, 'r');
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    } catch (error) {
      // Best effort: the error that matters is the write's.
      await rm(temp, { force: true }).catch(() => undefined);
      throw new ReplayRecordError(this.dir, `cannot write the trigger replay record in ${this.dir}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`, error);
    }
  }
}

/** The refusal a claim turns into, with the record's own word for a replay (`replay` or `signed-before-start`). */
export interface ReplayRefusal {
  why: 'replay' | 'replay-record-full' | 'replay-record-unavailable';
  claim?: ReplayClaim;
}

/**
 * Claims (caller, id) in `record`: undefined when it is new and on disk; the refusal otherwise,
 * including when there is no record or it cannot be written (a restart would forget the request).
 */
export async function claimOrRefuse(record: ReplayRecord | undefined, caller: string, id: string, timestamp: number, nowSeconds: number, windowSeconds: number): Promise<ReplayRefusal | undefined> {
  if (record === undefined) return { why: 'replay-record-unavailable' };
  let claim: ReplayClaim;
  try {
    claim = await record.claim(caller, id, timestamp, nowSeconds, windowSeconds);
  } catch {
    return { why: 'replay-record-unavailable' };
  }
  if (claim === 'claimed') return undefined;
  return claim === 'full' ? { why: 'replay-record-full' } : { why: 'replay', claim };
}
