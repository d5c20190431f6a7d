// The policy's `intake` section with its webhook secrets read (at daemon start and on every
// reload, like the trigger keys, and held to their 32-byte minimum). The GitHub token stays a
// reference: it is read per alert, so a token file a sidecar renews is picked up without a reload.
import type { Secret } from '../audit/public/secret.ts';
import { MIN_SIGNING_KEY_BYTES, signingKeyTooShort } from '../inbound/public/signature.ts';
import { resolveRef } from '../refs/public/secret-ref.ts';
import type { Policy } from '../policy/public/schema.ts';
import { WebhookSecretError } from './errors.ts';
import type { GitguardianIntakeRuntime } from './gitguardian/endpoint.ts';
import type { GithubIntakeRuntime } from './github/endpoint.ts';
import { githubReconcileRuntime } from './github/reconcile-settings.ts';

export interface IntakeRuntime {
  github?: GithubIntakeRuntime;
  gitguardian?: GitguardianIntakeRuntime;
}

export async function resolveIntake(policy: Policy, env: NodeJS.ProcessEnv): Promise<IntakeRuntime> {
  const intake = policy.intake;
  const out: IntakeRuntime = {};
  if (intake?.github !== undefined) {
    const reconcile = githubReconcileRuntime(intake.github);
    out.github = {
      webhookSecret: await readWebhookSecret('intake.github.webhookSecret', intake.github.webhookSecret, env),
      apiUrl: intake.github.apiUrl,
      tokenRef: intake.github.token,
      ...(reconcile === undefined ? {} : { reconcile }),
    };
  }
  if (intake?.gitguardian !== undefined) {
    out.gitguardian = {
      webhookSecret: await readWebhookSecret(
        'intake.gitguardian.webhookSecret',
        intake.gitguardian.webhookSecret,
        env,
      ),
      ...(intake.gitguardian.detectors === undefined ? {} : { detectors: [...intake.gitguardian.detectors] }),
    };
  }
  return out;
}

/** The same minimum as trigger keys (MIN_SIGNING_KEY_BYTES): the secret keys an HMAC anyone may try to forge. */
async function readWebhookSecret(field: string, ref: string, env: NodeJS.ProcessEnv): Promise<Secret> {
  const secret = await resolveRef(ref, env);
  if (signingKeyTooShort(secret)) {
    throw new WebhookSecretError(
      field,
      ref,
      `the secret is shorter than ${String(MIN_SIGNING_KEY_BYTES)} bytes; set at least ${String(MIN_SIGNING_KEY_BYTES)} random bytes (e.g. openssl rand -hex 32) in the scanner's webhook settings and here`,
    );
  }
  return secret;
}

export function intakeEnabled(policy: Policy): boolean {
  return policy.intake?.github !== undefined || policy.intake?.gitguardian !== undefined;
}
