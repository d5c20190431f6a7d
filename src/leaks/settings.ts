// The policy's `intake` section with its webhook secrets read (at daemon start and on every
// reload, like the trigger keys). The GitHub token stays a reference: it is read per alert, so a
// token file a sidecar renews is picked up without a reload.
import { resolveRef } from '../policy/refs.ts';
import type { Policy } from '../policy/schema.ts';
import type { GitguardianIntakeRuntime } from './gitguardian/endpoint.ts';
import type { GithubIntakeRuntime } from './github/endpoint.ts';

export interface IntakeRuntime {
  github?: GithubIntakeRuntime;
  gitguardian?: GitguardianIntakeRuntime;
}

export async function resolveIntake(policy: Policy, env: NodeJS.ProcessEnv): Promise<IntakeRuntime> {
  const intake = policy.intake;
  const out: IntakeRuntime = {};
  if (intake?.github !== undefined) {
    out.github = { webhookSecret: await resolveRef(intake.github.webhookSecret, env), apiUrl: intake.github.apiUrl, tokenRef: intake.github.token };
  }
  if (intake?.gitguardian !== undefined) {
    out.gitguardian = {
      webhookSecret: await resolveRef(intake.gitguardian.webhookSecret, env),
      ...(intake.gitguardian.detectors === undefined ? {} : { detectors: [...intake.gitguardian.detectors] }),
    };
  }
  return out;
}

export function intakeEnabled(policy: Policy): boolean {
  return policy.intake?.github !== undefined || policy.intake?.gitguardian !== undefined;
}
