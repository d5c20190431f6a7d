// POST /v1/rotations: the leak responder's button. Checks run cheapest-first and every refusal is
// audited with why and from where (`trigger.rejected`); an accepted request is audited with its
// actor, reason, ticket and the rotation ids it was promised (`trigger.accepted`), answered 202
// at once, and rotated in the background (force for leak/compromise, like `keyroll rotate`).
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { AuditLog } from '../audit/events.ts';
import type { Secret } from '../audit/secret.ts';
import type { KeyPolicy } from '../policy/schema.ts';
import { checkTriggerSignature, ReplayGuard, SIGNATURE_HEADER, TIMESTAMP_HEADER } from './trigger-auth.ts';
import { selectTriggerKeys, TriggerRequest } from './trigger-request.ts';

export const TRIGGER_PATH = '/v1/rotations';
/** A request names keys, not payloads: 64 KiB holds a thousand key ids with room to spare. */
export const MAX_TRIGGER_BODY_BYTES = 64 * 1024;

export interface IncomingTrigger {
  headers: IncomingHttpHeaders;
  /** The raw body, or 'too-large' when it passed MAX_TRIGGER_BODY_BYTES (reading stopped there). */
  body: Buffer | 'too-large';
  remoteAddress: string;
}

export interface HttpAnswer {
  status: number;
  body: unknown;
}

export interface PromisedRotation {
  keyId: string;
  rotationId: string;
}

export interface TriggerEndpointOptions {
  /** The HMAC secret; undefined when the daemon runs without --trigger-secret (endpoint disabled). */
  secret: () => Secret | undefined;
  now: () => Date;
  audit: () => AuditLog;
  /** False once shutdown began: no new work. */
  accepting: () => boolean;
  policyKeys: () => readonly KeyPolicy[];
  /** Starts the rotations in the background with the pre-assigned ids. Must not throw. */
  start: (keys: readonly KeyPolicy[], request: TriggerRequest, rotationIds: ReadonlyMap<string, string>) => void;
  replay?: ReplayGuard;
}

type Refusal = 'shutting-down' | 'disabled' | 'body-too-large' | 'missing-signature' | 'malformed-signature' | 'stale-timestamp' | 'bad-signature' | 'replay' | 'invalid-body' | 'unknown-keys' | 'unknown-org';

const STATUS: Record<Refusal, number> = {
  'shutting-down': 503,
  disabled: 404,
  'body-too-large': 413,
  'missing-signature': 401,
  'malformed-signature': 401,
  'stale-timestamp': 401,
  'bad-signature': 401,
  replay: 409,
  'invalid-body': 400,
  'unknown-keys': 400,
  'unknown-org': 400,
};

const MESSAGES: Record<Refusal, string> = {
  'shutting-down': 'keyroll is shutting down and starts no new rotations; retry against the next instance',
  disabled: 'the trigger endpoint is disabled (the daemon runs without --trigger-secret)',
  'body-too-large': `the body exceeds ${MAX_TRIGGER_BODY_BYTES} bytes`,
  'missing-signature': `the ${TIMESTAMP_HEADER} and ${SIGNATURE_HEADER} headers are required`,
  'malformed-signature': `${TIMESTAMP_HEADER} must be unix seconds and ${SIGNATURE_HEADER} must be sha256=<64 hex digits>`,
  'stale-timestamp': 'the timestamp is more than 300 seconds away from the daemon clock',
  'bad-signature': 'the signature does not match',
  replay: 'this signed request was already accepted',
  'invalid-body': 'the body is not a valid trigger request',
  'unknown-keys': 'these keys are not in the policy',
  'unknown-org': 'no key of this organization is in the policy',
};

export function createTriggerEndpoint(options: TriggerEndpointOptions): (request: IncomingTrigger) => HttpAnswer {
  const replay = options.replay ?? new ReplayGuard();

  const refuse = (request: IncomingTrigger, why: Refusal, extra: { details?: unknown } = {}): HttpAnswer => {
    options.audit().emit('trigger.rejected', { why, status: STATUS[why], remoteAddress: request.remoteAddress, ...(extra.details === undefined ? {} : { details: extra.details }) });
    return { status: STATUS[why], body: { error: { code: why, message: MESSAGES[why], ...(extra.details === undefined ? {} : { details: extra.details }) } } };
  };

  return (request) => {
    if (!options.accepting()) return refuse(request, 'shutting-down');
    const secret = options.secret();
    if (secret === undefined) return refuse(request, 'disabled');
    if (request.body === 'too-large') return refuse(request, 'body-too-large');

    const nowSeconds = Math.floor(options.now().getTime() / 1000);
    const signed = checkTriggerSignature(
      { timestampHeader: request.headers[TIMESTAMP_HEADER], signatureHeader: request.headers[SIGNATURE_HEADER], rawBody: request.body },
      secret,
      nowSeconds,
    );
    if (!signed.ok) return refuse(request, signed.why);
    // Recorded before the body is judged: a signed request is spent even when its body is refused.
    if (replay.checkAndRecord(signed.digest, signed.timestamp, nowSeconds)) return refuse(request, 'replay');

    let json: unknown;
    try {
      json = JSON.parse(request.body.toString('utf8'));
    } catch {
      return refuse(request, 'invalid-body', { details: [{ path: '', message: 'is not JSON' }] });
    }
    const parsed = TriggerRequest.safeParse(json);
    if (!parsed.success) {
      return refuse(request, 'invalid-body', { details: parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })) });
    }
    const body = parsed.data;
    const selection = selectTriggerKeys(options.policyKeys(), body);
    if (!selection.ok) return refuse(request, selection.why, { details: { unknown: selection.unknown } });

    const rotationIds = new Map(selection.keys.map((key) => [key.id, randomUUID()]));
    const rotations: PromisedRotation[] = selection.keys.map((key) => ({ keyId: key.id, rotationId: rotationIds.get(key.id) ?? '' }));
    const force = body.reason === 'leak' || body.reason === 'compromise';
    options.audit().emit('trigger.accepted', {
      actor: body.actor,
      reason: body.reason,
      ...(body.ticket === undefined ? {} : { ticket: body.ticket }),
      keys: selection.keys.map((key) => key.id),
      rotations,
      force,
      remoteAddress: request.remoteAddress,
    });
    options.start(selection.keys, body, rotationIds);
    return { status: 202, body: { reason: body.reason, force, rotations } };
  };
}
