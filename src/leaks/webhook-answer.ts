// Answers of the leak intake endpoints (POST /v1/leaks/github, /v1/leaks/gitguardian). Refusals
// share the trigger's audit budget (inbound/rejection-audit.ts: `trigger.rejected` with the
// endpoint in `details`), so a flood on any endpoint of the port cannot flood the audit trail,
// and answer with the status every signed endpoint gives the same code (inbound/answers.ts);
// only the messages are their own.
import type { z } from 'zod';
import { refuse, type HttpAnswer, type InboundRequest, type Refusal } from '../inbound/public/answers.ts';
import type { RejectionAudit } from '../inbound/public/rejection-audit.ts';

/** Scanner payloads are a few KiB; GitGuardian's may list many occurrences. */
export const MAX_LEAK_WEBHOOK_BYTES = 512 * 1024;

/** The refusals of the signed endpoints, less those about key selection and actors (a scanner names neither). */
export type IntakeRefusal = Exclude<Refusal, 'actor-mismatch' | 'unknown-keys' | 'unknown-org'>;

const MESSAGES: Record<IntakeRefusal, string> = {
  'shutting-down': 'keyroll is shutting down; the sender retries or redelivers',
  disabled: 'this leak source is not enabled in the policy (intake)',
  'body-too-large': `the body exceeds ${MAX_LEAK_WEBHOOK_BYTES} bytes`,
  'missing-signature': 'the signature headers are missing',
  'malformed-signature': 'the signature headers are malformed',
  'stale-timestamp': 'the timestamp is too far from the daemon clock',
  'bad-signature': 'the signature does not match',
  replay: 'this delivery (the same signed body) was already received',
  'replay-record-full': 'too many deliveries within the replay window; retry in a few minutes',
  'replay-record-unavailable': 'the daemon cannot record the delivery durably; redeliver later',
  'invalid-body': 'the body is not a payload this endpoint understands',
  'intake-busy': 'too many leak alerts are being handled at once; redeliver in a few minutes',
};

export function refuseIntake(
  rejections: RejectionAudit,
  endpoint: string,
  request: InboundRequest,
  why: IntakeRefusal,
): HttpAnswer {
  return refuse(rejections, request, why, { message: MESSAGES[why], auditDetails: { endpoint } });
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
