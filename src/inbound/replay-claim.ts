// What every signed endpoint claims its request ids in (the trigger's nonces, GitHub delivery
// digests, GitGuardian signatures): a replay record. Two kinds implement it, chosen by the daemon's
// --replay-store (inbound/replay-records.ts): an append-only file in the state directory, for a
// single daemon (replay-record.ts), and an object of the Kubernetes API that every replica claims
// in with optimistic concurrency (kube-replay-record.ts), so a request one replica accepted is a
// replay to every other. Both answer a claim only once it is durable: the request is answered, and
// its work started, after that; a claim that cannot be made durable refuses the request.
import { KeyrollError } from '../errors.ts';

/** claimed: first sight, durably recorded. replay: seen before. signed-before-start: older than the record. full: at capacity. */
export type ReplayClaim = 'claimed' | 'replay' | 'signed-before-start' | 'full';

/** How the record was found at open: read back, absent (first start), or unreadable (started afresh). */
export type ReplayRecordOrigin = 'loaded' | 'new' | 'unreadable';

export interface ReplayRecord {
  readonly origin: ReplayRecordOrigin;
  /** Where it lives, for messages: a file path, or `configmap NAMESPACE/NAME`. */
  readonly where: string;
  /**
   * Records `id` until `expiresAt` (unix seconds) unless seen before; resolves once it is durable.
   * `signedAt` is the sender's signed timestamp, where there is one. Throws ReplayRecordError when
   * the claim cannot be made durable: the request must then be refused, since it could be replayed.
   */
  claim(id: string, expiresAt: number, nowSeconds: number, signedAt?: number): Promise<ReplayClaim>;
}

export class ReplayRecordError extends KeyrollError {
  override name = 'ReplayRecordError';
  /** The record's place (ReplayRecord.where). */
  readonly where: string;
  /** The API server's HTTP status, for a record in Kubernetes that answered one. */
  readonly status: number | undefined;
  constructor(where: string, message: string, options: { cause?: unknown; status?: number } = {}) {
    super('KR_REPLAY_RECORD', message, { cause: options.cause });
    this.where = where;
    this.status = options.status;
  }
}

/** The refusal a claim turns into, with the record's own word for a replay (`replay` or `signed-before-start`). */
export interface ReplayRefusal {
  why: 'replay' | 'replay-record-full' | 'replay-record-unavailable';
  claim?: ReplayClaim;
}

/**
 * Claims `id` in `record`: undefined when it is new and durable; the refusal otherwise, including
 * when there is no record or it cannot be written (another replica, or a restart, would not know it).
 */
export async function claimOrRefuse(
  record: ReplayRecord | undefined,
  id: string,
  expiresAt: number,
  nowSeconds: number,
  signedAt?: number,
): Promise<ReplayRefusal | undefined> {
  if (record === undefined) return { why: 'replay-record-unavailable' };
  let claim: ReplayClaim;
  try {
    claim = await record.claim(id, expiresAt, nowSeconds, signedAt);
  } catch {
    return { why: 'replay-record-unavailable' };
  }
  if (claim === 'claimed') return undefined;
  return claim === 'full' ? { why: 'replay-record-full' } : { why: 'replay', claim };
}
