// What every signed endpoint of the daemon's port answers (POST /v1/rotations and the leak
// intake endpoints): the request as the server hands it over, the answer, and the refusals with
// their HTTP statuses. One code means one status on every endpoint, so a caller or a dashboard
// reads `replay` or `bad-signature` the same way wherever it came from; each endpoint words its
// own messages. Every refusal is counted and audited within a budget (rejection-audit.ts).
import type { IncomingHttpHeaders } from 'node:http';
import type { RejectionAudit } from './rejection-audit.ts';

export interface InboundRequest {
  headers: IncomingHttpHeaders;
  /** The raw body, or 'too-large' when it passed the endpoint's cap (reading stopped there). */
  body: Buffer | 'too-large';
  remoteAddress: string;
}

export interface HttpAnswer {
  status: number;
  body: unknown;
}

export type Refusal =
  | 'shutting-down'
  | 'disabled'
  | 'body-too-large'
  | 'missing-signature'
  | 'malformed-signature'
  | 'stale-timestamp'
  | 'bad-signature'
  | 'replay'
  | 'replay-record-full'
  | 'replay-record-unavailable'
  | 'invalid-body'
  | 'actor-mismatch'
  | 'unknown-keys'
  | 'unknown-org'
  | 'intake-busy';

export const REFUSAL_STATUS: Record<Refusal, number> = {
  'shutting-down': 503,
  disabled: 404,
  'body-too-large': 413,
  'missing-signature': 401,
  'malformed-signature': 401,
  'stale-timestamp': 401,
  'bad-signature': 401,
  replay: 409,
  'replay-record-full': 503,
  'replay-record-unavailable': 503,
  'invalid-body': 400,
  'actor-mismatch': 400,
  'unknown-keys': 400,
  'unknown-org': 400,
  'intake-busy': 503,
};

export interface RefusalNote {
  message: string;
  /** The caller whose key verified (the trigger), on the audit line. */
  caller?: string;
  /** In the answer and on the audit line. */
  details?: unknown;
  /** On the audit line only, in place of `details` (e.g. which endpoint refused). */
  auditDetails?: unknown;
}

/** Counts and audits the refusal (within the budget) and words the answer: `{ error: { code, message, details? } }`. */
export function refuse(
  rejections: RejectionAudit,
  request: InboundRequest,
  why: Refusal,
  note: RefusalNote,
): HttpAnswer {
  const status = REFUSAL_STATUS[why];
  const audited = note.auditDetails ?? note.details;
  rejections.record({
    why,
    status,
    remoteAddress: request.remoteAddress,
    ...(note.caller === undefined ? {} : { caller: note.caller }),
    ...(audited === undefined ? {} : { details: audited }),
  });
  return {
    status,
    body: {
      error: {
        code: why,
        message: note.message,
        ...(note.details === undefined ? {} : { details: note.details }),
      },
    },
  };
}

/** A header sent once; undefined when absent or repeated (a repeated signature header is not one signature). */
export function singleHeader(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}
