// keyroll as the rotation function of an AWS Secrets Manager secret (scheduler: aws-native;
// docs/aws-native.md). Secrets Manager invokes it four times per rotation with the same
// ClientRequestToken; each step is its own file and safe to repeat:
//   createSecret  preflight, lock, decide, intent, roll the standby, put it as AWSPENDING (create-secret.ts)
//   setSecret     nothing: the roll itself set the new value at the API
//   testSecret    the AWSPENDING value works, and so does AWSCURRENT (test-secret.ts)
//   finishSecret  AWSCURRENT moves, AWSPENDING removed, rotation recorded, lock given back (finish-secret.ts)
// The bundle (`npm run build`: dist/keyroll-aws-rotation.zip) exports `handler`.
import { createAuditLog } from '../audit/public/logger.ts';
import type { AuditLog } from '../audit/public/events.ts';
import { withSecretScope } from '../audit/public/sanitize.ts';
import { errorCode, errorMessage } from '../errors.ts';
import { loadPolicy } from '../policy/public/load.ts';
import type { Policy } from '../policy/public/schema.ts';
import type { RuntimeOptions } from '../rotation/public/runtime.ts';
import { functionApiCredential } from './api-credential.ts';
import { openNativeContext, type NativeContext } from './context.ts';
import { createSecret } from './create-secret.ts';
import { NativeRotationError, reportedErrors } from './errors.ts';
import { RotationEvent } from './event.ts';
import { finishSecret } from './finish-secret.ts';
import { functionLocation, nativeKeyFor } from './secret-location.ts';
import { testSecret } from './test-secret.ts';

/** Where the policy is read in Lambda: KEYROLL_POLICY, else policy.yaml beside the handler (in the zip). */
export const LAMBDA_POLICY_PATH = '/var/task/policy.yaml';

export interface RotationFunctionOptions {
  /** The policy (tests); else read from KEYROLL_POLICY or LAMBDA_POLICY_PATH. */
  policy?: Policy;
  audit?: AuditLog;
  runtime?: Partial<RuntimeOptions>;
  /** The function's environment (default process.env): KEYROLL_POLICY, KEYROLL_API_TOKEN_SECRET_ARN (api-credential.ts), AWS_REGION. */
  env?: NodeJS.ProcessEnv;
  /** The function's own ARN (the Lambda context's invokedFunctionArn): its partition, region and account bound which secrets it rotates. */
  functionArn?: string;
}

/** The part of the Lambda context object the function reads. */
export interface LambdaContext {
  invokedFunctionArn?: string;
}

/** What a step did, as audited (`key.native.step`). */
export interface StepResult {
  step: RotationEvent['Step'];
  did: string;
  keyId: string;
}

export async function runRotationStep(
  input: unknown,
  options: RotationFunctionOptions = {},
): Promise<StepResult> {
  const audit = options.audit ?? createAuditLog({ destination: process.stdout });
  const parsed = RotationEvent.safeParse(input);
  if (!parsed.success) {
    // The event's fields are ids, not values; still, only their names are repeated.
    throw new NativeRotationError(
      'KR_NATIVE_EVENT_INVALID',
      `not a Secrets Manager rotation event (needs Step, SecretId and a ClientRequestToken of 32 to 64 characters): ${parsed.error.issues.map((issue) => issue.path.join('.')).join(', ')}`,
    );
  }
  const event = parsed.data;
  const env = options.env ?? process.env;
  const policy = options.policy ?? (await loadPolicy(env.KEYROLL_POLICY ?? LAMBDA_POLICY_PATH));
  return withSecretScope(async () => {
    // Before any request: the event's secret is the entry's destination by name AND by where it
    // lives (partition, region, account); a namesake elsewhere is refused (secret-location.ts).
    const key = nativeKeyFor(policy, event.SecretId, functionLocation(options.functionArn, env));
    const credentials = functionApiCredential(policy, key, env, options.runtime);
    const ctx = await openNativeContext(policy, key, event, audit, {
      ...options.runtime,
      ...(options.env ? { env: options.env } : {}),
      ...(credentials ? { credentials } : {}),
    });
    try {
      const did = await runStep(ctx);
      return { step: event.Step, did, keyId: ctx.key.id };
    } catch (error) {
      if (!(error instanceof Error && reportedErrors.has(error))) {
        ctx.audit.emit('key.failed', {
          step: event.Step,
          errorCode: errorCode(error),
          error: errorMessage(error),
          nextAction: 'Secrets Manager retries the step, then records the rotation as failed',
        });
      }
      throw error;
    } finally {
      // Alerts go out after the lock is given back (deferred-alerts.ts), before the invocation ends.
      await ctx.deferred.flush();
      await ctx.runtime.close();
    }
  });
}

async function runStep(ctx: NativeContext): Promise<string> {
  switch (ctx.event.Step) {
    case 'createSecret':
      return createSecret(ctx);
    case 'setSecret':
      // The roll at the API was the set: the new key exists there since createSecret.
      ctx.audit.emit('key.native.step', {
        step: 'setSecret',
        did: 'nothing-to-do',
        version: ctx.token,
        why: 'the roll in createSecret already set the new key at the API',
      });
      return 'nothing-to-do';
    case 'testSecret':
      return testSecret(ctx);
    case 'finishSecret':
      return finishSecret(ctx);
  }
}

/** The Lambda entry point (Node 24 runtime, handler `index.handler`). */
export async function handler(event: unknown, context?: LambdaContext): Promise<void> {
  await runRotationStep(
    event,
    context?.invokedFunctionArn === undefined ? {} : { functionArn: context.invokedFunctionArn },
  );
}
