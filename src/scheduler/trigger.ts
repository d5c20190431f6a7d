// POST /v1/rotations: the leak responder's button. Checks run cheapest-first; every refusal is
// counted and audited within a budget (`trigger.rejected`, inbound/rejection-audit.ts). An accepted
// request is recorded durably (inbound/replay-record.ts) before anything starts, audited with the caller
// whose key signed it as the actor, its reason, ticket and the rotation ids it was promised
// (`trigger.accepted`), answered 202 at once, and rotated in the background (force for
// leak/compromise, like `keyroll rotate`). The 202 comes before any rotation starts (a request
// may name a thousand keys): it says so (`started: false`), since a replica that dies before
// starting them leaves nothing another replica or a reconcile could find; the caller confirms
// and sends again (docs/daemon.md, "Replicas and the leader").
import { randomUUID } from 'node:crypto';
import type { AuditLog } from '../audit/public/events.ts';
import {
  refuse as refuseRequest,
  type HttpAnswer,
  type InboundRequest,
  type Refusal,
} from '../inbound/public/answers.ts';
import type { RejectionAudit } from '../inbound/public/rejection-audit.ts';
import { claimOrRefuse, type ReplayRecord } from '../inbound/public/replay-claim.ts';
import type { KeyPolicy } from '../policy/public/schema.ts';
import { isLeakReason } from '../rotation/public/types.ts';
import {
  CALLER_HEADER,
  checkTriggerSignature,
  MAX_CLOCK_SKEW_SECONDS,
  NONCE_HEADER,
  SIGNATURE_HEADER,
  TIMESTAMP_HEADER,
  type TriggerKeyLookup,
} from './trigger-auth.ts';
import { selectTriggerKeys, TriggerRequest } from './trigger-request.ts';

export const TRIGGER_PATH = '/v1/rotations';
/** A request names keys, not payloads: 64 KiB holds a thousand key ids with room to spare. */
export const MAX_TRIGGER_BODY_BYTES = 64 * 1024;

export interface PromisedRotation {
  keyId: string;
  rotationId: string;
}

/** What a started trigger carries: the request and the caller that signed it (the actor). */
export interface AcceptedTrigger {
  request: TriggerRequest;
  caller: string;
}

export interface TriggerEndpointOptions {
  /** The key of each caller; undefined when the daemon runs without --trigger-key (endpoint disabled). */
  keys: () => TriggerKeyLookup | undefined;
  /** Where accepted requests are recorded; present whenever keys are. */
  replay: () => ReplayRecord | undefined;
  rejections: RejectionAudit;
  now: () => Date;
  audit: () => AuditLog;
  /** False once shutdown began: no new work. */
  accepting: () => boolean;
  policyKeys: () => readonly KeyPolicy[];
  /** Starts the rotations in the background with the pre-assigned ids. Must not throw. */
  start: (
    keys: readonly KeyPolicy[],
    trigger: AcceptedTrigger,
    rotationIds: ReadonlyMap<string, string>,
    slots?: ReadonlyMap<string, string>,
  ) => void;
}

/**
 * What a 202 tells its caller besides the rotation ids: they are queued on this replica only, and
 * nothing else knows of the request until each rotation writes its intent marker.
 */
const QUEUED = {
  note: 'queued on this replica, not started: if it stops before they start, no other replica runs them; confirm each rotationId (audit key.succeeded) and send a new request with a fresh nonce for any that did not happen',
} as const;

/** The trigger's refusals: all but the leak intake's own. */
export type TriggerRefusal = Exclude<Refusal, 'intake-busy'>;

const MESSAGES: Record<TriggerRefusal, string> = {
  'shutting-down': 'keyroll is shutting down and starts no new rotations; retry against the next instance',
  disabled: 'the trigger endpoint is disabled (the daemon runs without --trigger-key)',
  'body-too-large': `the body exceeds ${MAX_TRIGGER_BODY_BYTES} bytes`,
  'missing-signature': `the ${CALLER_HEADER}, ${TIMESTAMP_HEADER}, ${NONCE_HEADER} and ${SIGNATURE_HEADER} headers are required`,
  'malformed-signature': `${CALLER_HEADER} must be a caller name, ${TIMESTAMP_HEADER} unix seconds, ${NONCE_HEADER} 16-64 of [A-Za-z0-9_-] and ${SIGNATURE_HEADER} sha256=<64 hex digits>`,
  'stale-timestamp': `the timestamp is more than ${MAX_CLOCK_SKEW_SECONDS} seconds away from the daemon clock`,
  'bad-signature': 'the signature does not match',
  replay:
    'this caller already used this nonce, or the request was signed before the daemon started; sign a new request with a fresh nonce',
  'replay-record-full': 'too many triggers within the timestamp window; retry in a few minutes',
  'replay-record-unavailable': 'the daemon cannot record the request durably; retry, or use keyroll rotate',
  'invalid-body': 'the body is not a valid trigger request',
  'actor-mismatch': `actor must be left out or equal the caller named in ${CALLER_HEADER} (the key that signed is who asks)`,
  'unknown-keys': 'these keys are not in the policy',
  'unknown-org': 'no key of this organization is in the policy',
};

/** The body as a trigger request, or what refuses it (`invalid-body`, with each issue's path). */
function parseTriggerBody(
  raw: Buffer,
): { ok: true; body: TriggerRequest } | { ok: false; details: { path: string; message: string }[] } {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    return { ok: false, details: [{ path: '', message: 'is not JSON' }] };
  }
  const parsed = TriggerRequest.safeParse(json);
  if (!parsed.success) {
    return {
      ok: false,
      details: parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
    };
  }
  return { ok: true, body: parsed.data };
}

export function createTriggerEndpoint(
  options: TriggerEndpointOptions,
): (request: InboundRequest) => Promise<HttpAnswer> {
  const refuse = (
    request: InboundRequest,
    why: TriggerRefusal,
    extra: { details?: unknown; caller?: string } = {},
  ): HttpAnswer => refuseRequest(options.rejections, request, why, { message: MESSAGES[why], ...extra });

  return async (request) => {
    if (!options.accepting()) return refuse(request, 'shutting-down');
    const keys = options.keys();
    const replay = options.replay();
    if (keys === undefined || replay === undefined) return refuse(request, 'disabled');
    if (request.body === 'too-large') return refuse(request, 'body-too-large');

    const nowSeconds = Math.floor(options.now().getTime() / 1000);
    const signed = checkTriggerSignature(
      {
        callerHeader: request.headers[CALLER_HEADER],
        timestampHeader: request.headers[TIMESTAMP_HEADER],
        nonceHeader: request.headers[NONCE_HEADER],
        signatureHeader: request.headers[SIGNATURE_HEADER],
        rawBody: request.body,
      },
      keys,
      nowSeconds,
    );
    if (!signed.ok) return refuse(request, signed.why);
    const { caller } = signed;
    // Recorded, durably, before the body is judged: a signed request is spent even when its body is refused.
    // The record keeps (caller, nonce) until the timestamp leaves the window; past it the staleness check refuses it.
    const unclaimed = await claimOrRefuse(
      replay,
      `${caller}\n${signed.nonce}`,
      signed.timestamp + MAX_CLOCK_SKEW_SECONDS,
      nowSeconds,
      signed.timestamp,
    );
    if (unclaimed !== undefined)
      return refuse(request, unclaimed.why, {
        caller,
        ...(unclaimed.claim === undefined ? {} : { details: { record: unclaimed.claim } }),
      });

    const parsed = parseTriggerBody(request.body);
    if (!parsed.ok) return refuse(request, 'invalid-body', { caller, details: parsed.details });
    const { body } = parsed;
    if (body.actor !== undefined && body.actor !== caller)
      return refuse(request, 'actor-mismatch', { caller });
    const selection = selectTriggerKeys(options.policyKeys(), body);
    if (!selection.ok)
      return refuse(request, selection.why, { caller, details: { unknown: selection.unknown } });

    const rotationIds = new Map(selection.keys.map((key) => [key.id, randomUUID()]));
    const rotations: PromisedRotation[] = selection.keys.map((key) => ({
      keyId: key.id,
      rotationId: rotationIds.get(key.id) ?? '',
    }));
    const force = isLeakReason(body.reason);
    options.audit().emit('trigger.accepted', {
      actor: caller,
      reason: body.reason,
      ...(body.ticket === undefined ? {} : { ticket: body.ticket }),
      keys: selection.keys.map((key) => key.id),
      rotations,
      force,
      remoteAddress: request.remoteAddress,
    });
    options.start(selection.keys, { request: body, caller }, rotationIds, selection.slots);
    return {
      status: 202,
      body: { reason: body.reason, force, actor: caller, rotations, started: false, ...QUEUED },
    };
  };
}
