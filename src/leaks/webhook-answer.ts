// Answers of the leak intake endpoints (POST /v1/leaks/github, /v1/leaks/gitguardian). Refusals
// share the trigger's audit budget (rejection-audit.ts: `trigger.rejected` with the endpoint in
// `details`), so a flood on any endpoint of the port cannot flood the audit trail, and answer
// with the trigger's status for the same code (REFUSAL_STATUS); only the messages are their own.
import type { z } from 'zod';
import type { RejectionAudit } from '../scheduler/rejection-audit.ts';
import type { ReplayRecord } from '../scheduler/replay-record.ts';
import { REFUSAL_STATUS, type HttpAnswer, type IncomingTrigger, type Refusal } from '../scheduler/trigger.ts';

/** Scanner payloads are a few KiB; GitGuardian's may list many occurrences. */
export const MAX_LEAK_WEBHOOK_BYTES = 512 * 1024;

/** The trigger's refusals, less those about key selection and actors (a scanner names neither). */
export type IntakeRefusal = Exclude<Refusal, 'actor-mismatch' | 'unknown-keys' | 'unknown-org'>;

const MESSAGES: Record<IntakeRefusal, string> = {
  'shutting-down': 'keyroll is shutting down; the sender retries or redelivers',
  disabled: 'this leak source is not enabled in the policy (intake)',
  'body-too-large': `the body exceeds ${MAX_LEAK_WEBHOOK_BYTES} bytes`,
  'missing-signature': 'the signature headers are missing',
  'malformed-signature': 'the signature headers are malformed',
  'stale-timestamp': 'the timestamp is too far from the daemon clock',
  'bad-signature': 'the signature does not match',
  replay: 'this delivery was already received',
  'replay-record-full': 'too many deliveries within the replay window; retry in a few minutes',
  'replay-record-unavailable': 'the daemon cannot record the delivery durably; redeliver later',
  'invalid-body': 'the body is not a payload this endpoint understands',
};

export function refuseIntake(rejections: RejectionAudit, endpoint: string, request: IncomingTrigger, why: IntakeRefusal): HttpAnswer {
  const status = REFUSAL_STATUS[why];
  rejections.record({ why, status, remoteAddress: request.remoteAddress, details: { endpoint } });
  return { status, body: { error: { code: why, message: MESSAGES[why] } } };
}

export function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? (value.length === 1 ? value[0] : undefined) : value;
}

/**
 * Records the delivery `id` durably before its body is judged (replay-record.ts): the refusal
 * when it cannot be recorded or was seen before, undefined when it is new.
 */
export async function claimDelivery(replay: ReplayRecord | undefined, caller: string, id: string, timestamp: number, nowSeconds: number): Promise<IntakeRefusal | undefined> {
  if (replay === undefined) return 'replay-record-unavailable';
  let claim;
  try {
    claim = await replay.claim(caller, id, timestamp, nowSeconds);
  } catch {
    return 'replay-record-unavailable';
  }
  if (claim === 'full') return 'replay-record-full';
  return claim === 'claimed' ? undefined : 'replay';
}

/** The body parsed as JSON and by `schema`; undefined when it is not JSON or not that payload ('invalid-body'). */
export function parseBody<T>(body: Buffer, schema: z.ZodType<T>): T | undefined {
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    return undefined;
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}
