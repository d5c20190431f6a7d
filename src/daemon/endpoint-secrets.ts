// What the daemon's port checks requests with: the trigger's caller keys (--trigger-key), the
// metrics token (--metrics-token) and the leak intake's webhook secrets (the policy's `intake`).
// They are read from their references at start and again on every reload (SIGHUP), all or none:
// a reload that cannot read one keeps every one it had. The replay record of each signed endpoint
// that is on is opened here too, once for the daemon's life (inbound/replay-records.ts) and before
// that endpoint serves: no request is accepted that a restart could forget.
import type { Secret } from '../audit/public/secret.ts';
import { UsageError } from '../errors.ts';
import type { ReplayRecords } from '../inbound/public/replay-records.ts';
import { intakeEnabled, resolveIntake, type IntakeRuntime } from '../leaks/public/settings.ts';
import type { Policy } from '../policy/public/schema.ts';
import { resolveRef } from '../refs/public/secret-ref.ts';
import { resolveTriggerKeys, type TriggerKeySpec } from '../scheduler/public/trigger-keys.ts';

export interface EndpointSecrets {
  /** Each caller's key; undefined when the daemon runs without --trigger-key (the trigger answers 404). */
  triggerKeys: ReadonlyMap<string, Secret> | undefined;
  /** Unlocks per-key series on /metrics; without it they are never served. */
  metricsToken: Secret | undefined;
  /** The leak sources the policy turns on, with their webhook secrets. */
  intake: IntakeRuntime;
}

export interface EndpointSecretRefs {
  triggerKeys: readonly TriggerKeySpec[];
  metricsTokenRef: string | undefined;
  /** Where the replay records live (--state-dir, or --replay-store); needed once the trigger or a leak source is on. */
  replays: ReplayRecords | undefined;
  env: NodeJS.ProcessEnv;
}

/** Reads every secret `policy` and the flags name and opens the records their endpoints need; throws on the first that fails. */
export async function readEndpointSecrets(
  policy: Policy,
  refs: EndpointSecretRefs,
): Promise<EndpointSecrets> {
  const triggerKeys =
    refs.triggerKeys.length > 0 ? await resolveTriggerKeys(refs.triggerKeys, refs.env) : undefined;
  const metricsToken = refs.metricsTokenRef ? await resolveRef(refs.metricsTokenRef, refs.env) : undefined;
  if (triggerKeys !== undefined) {
    if (refs.replays === undefined)
      throw new UsageError(
        'the trigger needs a state directory for its replay record (--state-dir) or a shared one (--replay-store)',
      );
    await refs.replays.open('trigger');
  }
  const intake = await resolveIntake(policy, refs.env);
  if (intakeEnabled(policy)) {
    if (refs.replays === undefined)
      throw new UsageError(
        'the leak intake needs a state directory for its replay record (--state-dir) or a shared one (--replay-store)',
      );
    if (policy.intake?.github !== undefined) await refs.replays.open('github');
    if (policy.intake?.gitguardian !== undefined) await refs.replays.open('gitguardian');
  }
  return { triggerKeys, metricsToken, intake };
}
