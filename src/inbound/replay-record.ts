// One source's replay record for a single daemon (--replay-store file, the default): every id it
// accepted (a trigger caller's nonce, the digest of a GitHub delivery's body, a GitGuardian
// signature) until the id's expiry, kept in an append-only file in the daemon's state directory.
// A claim is durable before the request is answered or any work starts (its line written and
// fdatasynced), so a restarted daemon reads it back and a captured request is refused after a
// restart as it was before (409), not replayed. Replicas do not share it: kube-replay-record.ts.
//
// The cost of a claim does not grow with the record: a claim appends one line (about 50-90
// bytes) and syncs once; claims that arrive while a sync runs share the next one. The file is
// compacted (live entries rewritten to a temporary file, fsynced, renamed over it, the directory
// fsynced) at open and whenever it holds more than twice the live entries plus COMPACT_SLACK
// lines, so compaction costs a bounded amount per claim on average. Expiry uses a heap, not a
// scan of every entry.
//
// When the file is missing or unreadable (first start, a volume that did not survive, damage),
// the daemon cannot know what its predecessor accepted: for a signed timestamp (trigger,
// GitGuardian) it then refuses every request signed before it started (`notBefore`), which costs
// a legitimate sender at most a re-signed retry. A last line cut by a crash is not damage: its
// claim was never acknowledged.
import { randomUUID } from 'node:crypto';
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ExpiryHeap } from './expiry-heap.ts';
import {
  ReplayRecordError,
  type ReplayClaim,
  type ReplayRecord,
  type ReplayRecordOrigin,
} from './replay-claim.ts';

/** Live entries at most per source: 10,000 accepted requests within one window is abuse by a key holder, not use. */
export const DEFAULT_REPLAY_CAPACITY = 10_000;
/** Lines beyond twice the live entries before the file is compacted. */
const COMPACT_SLACK = 1024;

const Header = z.strictObject({ version: z.literal(2), notBefore: z.number().int().nonnegative() });
const Entry = z.tuple([z.string().min(1), z.number().int()]);

interface PendingLine {
  line: string;
  done: PromiseWithResolvers<undefined>;
}

export class FileReplayRecord implements ReplayRecord {
  readonly dir: string;
  readonly file: string;
  readonly origin: ReplayRecordOrigin;
  readonly where: string;
  readonly #path: string;
  readonly #capacity: number;
  readonly #notBefore: number;
  /** id -> unix seconds after which it is forgotten. */
  readonly #seen: Map<string, number>;
  readonly #expiry = new ExpiryHeap();
  /** Lines in the file, the header included: what compaction bounds. */
  #fileLines = 0;
  #pending: PendingLine[] = [];
  #flushing = false;

  private constructor(
    dir: string,
    file: string,
    origin: ReplayRecordOrigin,
    notBefore: number,
    seen: Map<string, number>,
    capacity: number,
  ) {
    this.dir = dir;
    this.file = file;
    this.origin = origin;
    this.#path = join(dir, file);
    this.where = this.#path;
    this.#notBefore = notBefore;
    this.#seen = seen;
    this.#capacity = capacity;
    for (const [id, expiresAt] of seen) this.#expiry.push(expiresAt, id);
  }

  /** Reads `file` in `dir` (the directory created 0700 when missing) and compacts it at once, proving the directory writable. */
  static async open(
    dir: string,
    file: string,
    nowSeconds: number,
    capacity = DEFAULT_REPLAY_CAPACITY,
  ): Promise<FileReplayRecord> {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    } catch (error) {
      throw new ReplayRecordError(
        dir,
        `cannot create the state directory ${dir}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
        { cause: error },
      );
    }
    let text: string | undefined;
    try {
      text = await readFile(join(dir, file), 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') text = '';
    }
    const read = text === undefined ? undefined : readRecord(text, nowSeconds);
    const origin: ReplayRecordOrigin =
      text === undefined ? 'new' : read?.damaged === false ? 'loaded' : 'unreadable';
    const notBefore = origin === 'loaded' && read?.notBefore !== undefined ? read.notBefore : nowSeconds;
    const record = new FileReplayRecord(
      dir,
      file,
      origin,
      notBefore,
      read?.seen ?? new Map<string, number>(),
      capacity,
    );
    await record.#compact();
    return record;
  }

  get size(): number {
    return this.#seen.size;
  }

  /**
   * Records `id` until `expiresAt` unless seen before; resolves once it is on disk. `signedAt` is
   * the sender's signed timestamp, where there is one. Throws ReplayRecordError when the claim
   * cannot be written: the request must then be refused, since a restart would forget it.
   */
  async claim(id: string, expiresAt: number, nowSeconds: number, signedAt?: number): Promise<ReplayClaim> {
    if (signedAt !== undefined && signedAt < this.#notBefore) return 'signed-before-start';
    this.#forgetExpired(nowSeconds);
    // Checked and set before the first await: a duplicate arriving while this one is written is a replay.
    if (this.#seen.has(id)) return 'replay';
    if (this.#seen.size >= this.#capacity) return 'full';
    this.#seen.set(id, expiresAt);
    this.#expiry.push(expiresAt, id);
    try {
      await this.#append(`${JSON.stringify([id, expiresAt])}\n`);
    } catch (error) {
      this.#seen.delete(id);
      throw error;
    }
    return 'claimed';
  }

  #forgetExpired(nowSeconds: number): void {
    for (
      let next = this.#expiry.popBefore(nowSeconds);
      next !== undefined;
      next = this.#expiry.popBefore(nowSeconds)
    ) {
      // A stale heap entry (an id claimed again later, or dropped after a failed write) is skipped.
      if (this.#seen.get(next.id) === next.expiresAt) this.#seen.delete(next.id);
    }
  }

  /** Queues a line; one writer appends every queued line and syncs once, so concurrent claims share a sync. */
  #append(line: string): Promise<undefined> {
    const done = Promise.withResolvers<undefined>();
    this.#pending.push({ line, done });
    if (!this.#flushing) {
      this.#flushing = true;
      void this.#flush();
    }
    return done.promise;
  }

  async #flush(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending;
      this.#pending = [];
      try {
        // Compaction writes every live entry, this batch's included (they are in #seen already).
        if (this.#fileLines + batch.length > 2 * this.#seen.size + COMPACT_SLACK) await this.#compact();
        else await this.#appendLines(batch.map((pending) => pending.line).join(''), batch.length);
        for (const pending of batch) pending.done.resolve(undefined);
      } catch (error) {
        for (const pending of batch) pending.done.reject(error);
      }
    }
    this.#flushing = false;
  }

  async #appendLines(text: string, lines: number): Promise<void> {
    try {
      const handle = await open(this.#path, 'a', 0o600);
      try {
        await handle.writeFile(text);
        await handle.datasync();
      } finally {
        await handle.close();
      }
    } catch (error) {
      // What reached the file may be a cut line; the next compaction (or open) drops it.
      this.#fileLines = Number.POSITIVE_INFINITY;
      throw this.#writeError(error);
    }
    this.#fileLines += lines;
  }

  /** Rewrites the live entries to a temporary file, fsyncs it, renames it over the record and fsyncs the directory. */
  async #compact(): Promise<void> {
    const lines = [JSON.stringify({ version: 2, notBefore: this.#notBefore })];
    for (const [id, expiresAt] of this.#seen) lines.push(JSON.stringify([id, expiresAt]));
    const temp = join(this.dir, `.${this.file}.${randomUUID()}`);
    try {
      const handle = await open(temp, 'wx', 0o600);
      try {
        await handle.writeFile(`${lines.join('\n')}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      await rename(temp, this.#path);
      const dir = await open(this.dir, 'r');
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    } catch (error) {
      // Best effort: the error that matters is the write's.
      await rm(temp, { force: true }).catch(() => undefined);
      throw this.#writeError(error);
    }
    this.#fileLines = lines.length;
  }

  #writeError(error: unknown): ReplayRecordError {
    return new ReplayRecordError(
      this.#path,
      `cannot write the replay record ${this.file} in ${this.dir}: ${(error as NodeJS.ErrnoException).code ?? 'error'}`,
      { cause: error },
    );
  }
}

interface ReadRecord {
  notBefore?: number;
  seen: Map<string, number>;
  /** A header or a line that is not a record's (a cut last line does not count). */
  damaged: boolean;
}

/** The live entries of a record file; whatever parses is kept, even from a damaged file (more protection, never less). */
function readRecord(text: string, nowSeconds: number): ReadRecord {
  const seen = new Map<string, number>();
  // Every line ends with a newline: the last piece is empty, or a line a crash cut short (never acknowledged).
  const complete = text.split('\n').slice(0, -1);
  const header = Header.safeParse(parseJson(complete[0] ?? ''));
  let damaged = !header.success;
  for (const line of complete.slice(1)) {
    const entry = Entry.safeParse(parseJson(line));
    if (!entry.success) {
      damaged = true;
      continue;
    }
    const [id, expiresAt] = entry.data;
    if (expiresAt >= nowSeconds && expiresAt > (seen.get(id) ?? Number.NEGATIVE_INFINITY))
      seen.set(id, expiresAt);
  }
  return { ...(header.success ? { notBefore: header.data.notBefore } : {}), seen, damaged };
}

function parseJson(line: string): unknown {
  try {
    return JSON.parse(line);
  } catch {
    return undefined;
  }
}
