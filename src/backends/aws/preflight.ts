// Preflight (invariant 1): before any roll, prove that keyroll can write the secret, without
// writing a version. AWS has no dry run, so each needed permission is proven by a call that
// passes IAM but cannot change the value:
// - DescribeSecret: the credentials work, the secret exists (or may be created), it is not
//   scheduled for deletion.
// - PutSecretValue with the AWSCURRENT version's own id as ClientRequestToken and a probe value:
//   IAM is checked first, then AWS refuses the reused token (ResourceExistsException) before
//   storing anything. AccessDenied here means the write would be denied. The probe asks for a
//   staging label of its own, never AWSCURRENT: even if that version vanished in between (AWS
//   prunes unlabelled versions), the probe could at most add a version under that label; it can
//   never replace the live secret.
// - GetSecretValue of a staging label no version carries: proves the read-back is allowed
//   (ResourceNotFoundException) without fetching the current secret.
// - UpdateSecretVersionStage removing that same label from the AWSCURRENT version, which does not
//   carry it: the fenced write moves AWSCURRENT with this action (write-fenced.ts), and a denial there,
//   after the roll, would leave the new secret durable but not current. AWS checks IAM, then
//   refuses the request or has nothing to remove; no label changes either way.
// - TagResource keyroll:preflight=<time>: the intent marker and bookkeeping will work. Left out
//   when the rotation engine preflights a key's primary destination (`lockAndIntentFollow`): the
//   intent marker's own TagResource follows before the roll and proves the same action on the
//   same secret, so a rotation does not spend the account's tag quota twice on one proof.
//   (UntagResource is no longer used at all: a marker is cleared by overwriting it, record-tags.ts.)
// Not provable without a change: KMS encryption with the secret's key (AWS refuses the reused
// token before encrypting), and CreateSecret for a missing secret (the lock secret's creation
// exercises CreateSecret on `<name>.keyroll-lock` right after). Resource-based secret policies
// and SCPs are covered, since every probe is a real call on the real secret.
import { BackendError } from '../errors.ts';
import type { PreflightOptions, PreflightResult, StoreTarget } from '../types.ts';
import type { LockSightings } from './lock-value.ts';
import type { SecretsManagerCalls } from './client.ts';
import type { TargetHints } from './known.ts';
import { currentVersionOf, describeTarget } from './records.ts';
import { TAG_PREFLIGHT } from './record-tags.ts';
import { isSecretArn } from './target.ts';

export interface PreflightContext {
  calls: SecretsManagerCalls;
  backendName: string;
  createIfMissing: boolean;
  kmsKeyId?: string | undefined;
  now: () => Date;
  /** Where to note whether the target exists (the lock, intent and write calls choose their first try by it). */
  targets: TargetHints;
  /** Where a description's lock release mark is noted (lock.ts). */
  sightings?: LockSightings;
}

/** A value no one stores: sent only with a token AWS is certain to refuse. */
const PROBE_VALUE = 'keyroll-preflight-probe (never stored)';
/** A staging label keyroll never attaches, so reading it proves access and returns nothing. */
const PROBE_STAGE = 'KEYROLL_PREFLIGHT_READ';
/** The only label the write probe may ever attach (it never does while the token exists). */
const PROBE_WRITE_STAGE = 'KEYROLL_PREFLIGHT_WRITE';

function notFound(context: PreflightContext, path: string, why: string): BackendError {
  return new BackendError('KR_BACKEND_NOT_FOUND', `aws secret ${path} ${why}`, {
    backend: context.backendName,
    kind: 'aws',
    operation: 'preflight',
    path,
  });
}

/** Runs `probe`, accepting the error codes that prove the call passed IAM. */
async function expectRefusal(probe: Promise<unknown>, accepted: BackendError['code']): Promise<void> {
  try {
    await probe;
  } catch (error) {
    if (error instanceof BackendError && error.code === accepted) return;
    throw error;
  }
}

export async function preflight(context: PreflightContext, target: StoreTarget, options: PreflightOptions = {}): Promise<PreflightResult> {
  const path = target.path;
  const description = await describeTarget(context, path, 'preflight');
  context.targets.seen(path, description !== undefined);
  const checks = ['credentials accepted (secretsmanager:DescribeSecret)'];

  if (description === undefined) {
    if (isSecretArn(path)) throw notFound(context, path, 'does not exist (and a secret cannot be created from an ARN)');
    if (!context.createIfMissing) throw notFound(context, path, 'does not exist and createIfMissing is off for this backend');
    checks.push(`${path} does not exist yet; the first write creates it (createIfMissing)`);
    return { exists: false, checks };
  }
  if (description.DeletedDate !== undefined) {
    throw notFound(context, path, 'is scheduled for deletion: restore it (RestoreSecret) or choose another name');
  }

  const current = currentVersionOf(description);
  const probes: Promise<void>[] = [expectRefusal(context.calls.getSecretValue('preflight', { SecretId: path, VersionStage: PROBE_STAGE }), 'KR_BACKEND_NOT_FOUND')];
  if (options.lockAndIntentFollow !== true) probes.push(context.calls.tagResource('preflight', path, [{ Key: TAG_PREFLIGHT, Value: context.now().toISOString() }]));
  if (current !== undefined) {
    probes.push(
      context.calls.probeStageUpdate('preflight', path, current, PROBE_STAGE),
      expectRefusal(
        context.calls.putSecretValue('preflight', {
          SecretId: path,
          SecretString: PROBE_VALUE,
          ClientRequestToken: current,
          VersionStages: [PROBE_WRITE_STAGE],
        }),
        'KR_BACKEND_CONFLICT',
      ),
    );
  }
  await Promise.all(probes);

  if (current === undefined) {
    checks.push(`${path} exists without a value; the first write adds it (PutSecretValue not provable without a version)`);
  } else {
    checks.push(
      `secretsmanager:PutSecretValue allowed on ${path} (probe refused without storing)`,
      `secretsmanager:UpdateSecretVersionStage allowed on ${path} (the fenced write's move of AWSCURRENT; probe changed no label)`,
    );
  }
  checks.push(
    'secretsmanager:GetSecretValue allowed (read-back)',
    options.lockAndIntentFollow === true ? 'secretsmanager:TagResource: proven by the intent marker before the roll' : 'secretsmanager:TagResource allowed (intent marker)',
  );
  if (description.RotationEnabled === true) {
    checks.push(`warning: ${path} also has AWS-native rotation enabled; its rotation function would replace keyroll's secret`);
  }
  if (context.kmsKeyId !== undefined && description.KmsKeyId !== undefined && description.KmsKeyId !== context.kmsKeyId) {
    checks.push(`note: ${path} is encrypted with KMS key ${description.KmsKeyId}; the configured kmsKeyId applies only to secrets keyroll creates`);
  }
  return { exists: current !== undefined, checks };
}
