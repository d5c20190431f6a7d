// One source's replay record shared by every replica of the daemon (--replay-store kubernetes):
// the entries live in the data of one object of the Kubernetes API (a ConfigMap the chart renders,
// configmap-replay-object.ts), one key per accepted id (the first 128 bits of its SHA-256,
// base64url) whose value is the id's expiry in unix seconds, beside one header key holding the
// record's version and `notBefore`. A claim is a replace of the whole object under the
// resourceVersion it was decided on: the API server takes it only if nobody wrote in between
// (else 409, and the claim is decided again on a fresh read), so of two replicas claiming one id
// at once exactly one gets `claimed`, and the answer comes only once etcd has committed it.
//
// Expired ids are dropped on every write, and the record holds at most `capacity` live entries,
// set so that a full record stays well under the 1 MiB a ConfigMap's data may hold
// (KUBE_REPLAY_MAX_CAPACITY). Claims that arrive while a write is in flight share the next write,
// as the file record's share a sync. Ids are hashed: a ConfigMap key allows only [-._a-zA-Z0-9],
// every entry then has the same small size, and nothing a sender chose is kept as it sent it.
//
// When the header is missing or unreadable (a new object, or one emptied by hand), nobody can know
// what was accepted before: the record refuses whatever was signed before the header is written
// (`notBefore`), as the file record does for a lost file. A replica that restarts, or a new pod,
// reads the same object: a replacement keeps everything its predecessors accepted.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { DEFAULT_REPLAY_CAPACITY } from './replay-record.ts';
import {
  ReplayRecordError,
  type ReplayClaim,
  type ReplayRecord,
  type ReplayRecordOrigin,
} from './replay-claim.ts';

/** What a ConfigMap's data may hold, keys and values together (the API server's validation). */
export const CONFIGMAP_DATA_LIMIT_BYTES = 1024 * 1024;
/** The header key: its `.` keeps it apart from every entry key (base64url has none). */
export const REPLAY_HEADER_KEY = 'keyroll.replay-record';
/** 22 base64url characters (128 bits of the id's SHA-256) + an expiry of at most 11 digits. */
const MAX_ENTRY_BYTES = 22 + 11;
/** Room for the header, with plenty to spare. */
const HEADER_BYTES = 256;
/** The most entries a ConfigMap holds; the default capacity (10,000, as the file's) uses about a third of it. */
export const KUBE_REPLAY_MAX_CAPACITY = Math.floor(
  (CONFIGMAP_DATA_LIMIT_BYTES - HEADER_BYTES) / MAX_ENTRY_BYTES,
);
/**
 * Writes one claim may try: each lost race means another replica's write landed, so a claim that
 * loses this many times in a row is refused (503) rather than held past the sender's timeout.
 */
const MAX_WRITE_ATTEMPTS = 8;

const Header = z.strictObject({ version: z.literal(1), notBefore: z.number().int().nonnegative() });
const ENTRY_KEY = /^[A-Za-z0-9_-]{22}$/;
const EXPIRY = /^\d{1,11}$/;

/** The object as read: its data and the version a write must name. */
export interface ReplayObjectState {
  data: Readonly<Record<string, string>>;
  resourceVersion: string;
}

/** The one object a record lives in; configmap-replay-object.ts implements it on the API server. */
export interface ReplayObject {
  /** `configmap NAMESPACE/NAME`, for messages. */
  readonly where: string;
  /** Throws ReplayRecordError (not found, forbidden, unreachable, timeout). */
  read(): Promise<ReplayObjectState>;
  /**
   * Replaces the object's data if it is still at `resourceVersion`; 'conflict' when someone wrote
   * in between. Throws ReplayRecordError otherwise (an answer lost to a timeout included: the
   * write may have landed).
   */
  replace(data: Record<string, string>, resourceVersion: string): Promise<ReplayObjectState | 'conflict'>;
}

interface PendingClaim {
  key: string;
  expiresAt: number;
  nowSeconds: number;
  signedAt: number | undefined;
  done: PromiseWithResolvers<ReplayClaim>;
}

/** The record as read from the object's data. */
interface Parsed {
  /** Undefined when the header is missing or unreadable. */
  notBefore: number | undefined;
  /** Entry key -> expiry, live or not. */
  entries: Map<string, number>;
}

export class KubeReplayRecord implements ReplayRecord {
  readonly origin: ReplayRecordOrigin;
  readonly where: string;
  readonly #object: ReplayObject;
  readonly #capacity: number;
  /** The last state read or written; undefined after a failure (the next claim reads afresh). */
  #state: ReplayObjectState | undefined;
  #pending: PendingClaim[] = [];
  #writing = false;

  private constructor(
    object: ReplayObject,
    origin: ReplayRecordOrigin,
    state: ReplayObjectState,
    capacity: number,
  ) {
    this.#object = object;
    this.where = object.where;
    this.origin = origin;
    this.#state = state;
    this.#capacity = capacity;
  }

  /**
   * Reads the object and writes it back at once (its header when missing, expired entries
   * dropped), which proves both verbs the record needs before the daemon serves. Throws
   * ReplayRecordError when it cannot.
   */
  static async open(
    object: ReplayObject,
    nowSeconds: number,
    capacity = DEFAULT_REPLAY_CAPACITY,
  ): Promise<KubeReplayRecord> {
    if (!Number.isInteger(capacity) || capacity < 1 || capacity > KUBE_REPLAY_MAX_CAPACITY) {
      throw new ReplayRecordError(
        object.where,
        `a replay record in a ConfigMap holds 1 to ${String(KUBE_REPLAY_MAX_CAPACITY)} entries (1 MiB), not ${String(capacity)}`,
      );
    }
    let origin: ReplayRecordOrigin | undefined;
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      const state = await object.read();
      const parsed = parseData(state.data);
      // The first read decides: a header another replica writes meanwhile does not make it 'loaded'.
      origin ??=
        parsed.notBefore !== undefined
          ? 'loaded'
          : Object.keys(state.data).length === 0
            ? 'new'
            : 'unreadable';
      const written = await object.replace(
        renderData(parsed.notBefore ?? nowSeconds, parsed.entries, nowSeconds),
        state.resourceVersion,
      );
      if (written !== 'conflict') return new KubeReplayRecord(object, origin, written, capacity);
    }
    throw new ReplayRecordError(
      object.where,
      `the replay record ${object.where} was written by others ${String(MAX_WRITE_ATTEMPTS)} times in a row while keyroll opened it`,
    );
  }

  claim(id: string, expiresAt: number, nowSeconds: number, signedAt?: number): Promise<ReplayClaim> {
    const done = Promise.withResolvers<ReplayClaim>();
    this.#pending.push({ key: entryKey(id), expiresAt, nowSeconds, signedAt, done });
    if (!this.#writing) {
      this.#writing = true;
      void this.#writeAll();
    }
    return done.promise;
  }

  /** One writer per record: every claim queued meanwhile is decided and written together. */
  async #writeAll(): Promise<void> {
    while (this.#pending.length > 0) {
      const batch = this.#pending;
      this.#pending = [];
      try {
        const answers = await this.#decideAndWrite(batch);
        batch.forEach((pending, index) => {
          pending.done.resolve(answers[index] ?? 'replay');
        });
      } catch (error) {
        this.#state = undefined;
        const failure =
          error instanceof ReplayRecordError
            ? error
            : new ReplayRecordError(this.where, `the replay record ${this.where} could not be written`, {
                cause: error,
              });
        for (const pending of batch) pending.done.reject(failure);
      }
    }
    this.#writing = false;
  }

  /**
   * Decides every claim of the batch on the state last seen and writes the result under its
   * resourceVersion; a conflict means that state was stale: read again and decide again. A batch
   * that claims nothing new writes nothing: ids leave the record only by expiring, so one seen in
   * a stale state is still there.
   */
  async #decideAndWrite(batch: readonly PendingClaim[]): Promise<ReplayClaim[]> {
    for (let attempt = 0; attempt < MAX_WRITE_ATTEMPTS; attempt++) {
      const state = this.#state ?? (await this.#object.read());
      this.#state = state;
      const nowSeconds = Math.max(...batch.map((pending) => pending.nowSeconds));
      const parsed = parseData(state.data);
      // A header gone (the object emptied) is a record started afresh, as at open.
      const notBefore = parsed.notBefore ?? nowSeconds;
      const live = new Map([...parsed.entries].filter(([, expiresAt]) => expiresAt >= nowSeconds));
      const answers = batch.map((pending): ReplayClaim => {
        if (pending.signedAt !== undefined && pending.signedAt < notBefore) return 'signed-before-start';
        if (live.has(pending.key)) return 'replay';
        if (live.size >= this.#capacity) return 'full';
        live.set(pending.key, pending.expiresAt);
        return 'claimed';
      });
      if (!answers.includes('claimed')) return answers;
      const written = await this.#object.replace(
        renderData(notBefore, live, nowSeconds),
        state.resourceVersion,
      );
      if (written !== 'conflict') {
        this.#state = written;
        return answers;
      }
      this.#state = undefined;
    }
    throw new ReplayRecordError(
      this.where,
      `the replay record ${this.where} was written by other replicas ${String(MAX_WRITE_ATTEMPTS)} times in a row; the request is refused rather than kept waiting`,
    );
  }
}

/** The record's key for `id`: ConfigMap keys allow only [-._a-zA-Z0-9]; 128 bits keep collisions out of reach. */
export function entryKey(id: string): string {
  return createHash('sha256').update(id).digest('base64url').slice(0, 22);
}

function parseData(data: Readonly<Record<string, string>>): Parsed {
  const entries = new Map<string, number>();
  let notBefore: number | undefined;
  // Keys that are neither a valid header nor an entry are dropped by the next write.
  for (const [key, value] of Object.entries(data)) {
    if (key === REPLAY_HEADER_KEY) {
      const header = Header.safeParse(parseJson(value));
      if (header.success) notBefore = header.data.notBefore;
    } else if (ENTRY_KEY.test(key) && EXPIRY.test(value)) {
      entries.set(key, Number(value));
    }
  }
  return { notBefore, entries };
}

/** The data to write: the header and the live entries only (expired ones are pruned on every write). */
function renderData(
  notBefore: number,
  entries: ReadonlyMap<string, number>,
  nowSeconds: number,
): Record<string, string> {
  const data: Record<string, string> = { [REPLAY_HEADER_KEY]: JSON.stringify({ version: 1, notBefore }) };
  for (const [key, expiresAt] of entries) if (expiresAt >= nowSeconds) data[key] = String(expiresAt);
  return data;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
