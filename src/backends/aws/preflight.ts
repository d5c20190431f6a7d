// Preflight (invariant 1): before any roll, prove that keyroll can write the secret, without
// writing the secret. AWS has no dry run, so each needed permission is proven by a call that passes
// IAM but cannot change the value, or by the lock taken on the secret itself before the roll:
// - DescribeSecret: the credentials work, the secret exists (or may be created), it is not
//   scheduled for deletion; its labels say whether it carries its own key lock yet (lock/lock.ts).
// - GetSecretValue of the label KEYROLL_LOCK, beside the description: proves the read-back is
//   allowed without fetching the secret (the lock's value is JSON without a secret, or there is no
//   such version), and is the lock value the acquire starts from (no read of its own).
// - PutSecretValue and UpdateSecretVersionStage, the fenced write's two calls (write-fenced.ts):
//   when the rotation engine takes the key lock on this target next (purpose `rotation`) and the target
//   has a value, the lock lives on the target and its compare-and-swap *is* those two calls there
//   (lock/target.ts), before the roll; nothing is probed (a rotation spends 4 of the account's write
//   quota, not 6). The target's first lock is one PutSecretValue, so then UpdateSecretVersionStage
//   is still probed. Otherwise (`keyroll validate`, the daemon's readiness, fallbacks) both probes:
//   PutSecretValue with the AWSCURRENT version's own id as ClientRequestToken and a probe value
//   (IAM is checked first, then AWS refuses the reused token before storing anything; the probe
//   asks for a label of its own, never AWSCURRENT), and UpdateSecretVersionStage removing a label
//   from the AWSCURRENT version, which does not carry it (no label changes).
// - TagResource keyroll:preflight=<time>: the intent marker and bookkeeping will work. Left out
//   when the intent marker's own TagResource follows before the roll (`rotation-primary`, the key's
//   primary destination): it proves the same action on the same secret.
// - ListSecretVersionIds, beside the probes, when a rotation follows (`rotation`) and the target
//   has a value: the versions AWS will not remove (created in the last 24 h, or labelled). Each
//   rotation adds versions there (the lock's put, the value's put, a put per lock refresh), and at
//   the quota the lock's put would pass and the value's put after the roll be refused: a rotation
//   whose own versions would not fit is refused now, before the lock (KR_BACKEND_VERSION_QUOTA).
//   One read request per rotation.
// Not provable without a change: CreateSecret for a missing secret (the companion lock's creation
// exercises CreateSecret right after), and, without the lock, KMS encryption with the secret's key
// (AWS refuses the reused token before encrypting; the lock's own put on the target does encrypt).
// Resource-based secret policies and SCPs are covered, since every call is a real call on the real
// secret. An IAM policy that allows these actions only for some staging labels must allow
// KEYROLL_LOCK and KEYROLL_LOCK_CANDIDATE as well as AWSCURRENT and KEYROLL_PENDING.
import { BackendError } from '../errors.ts';
import type { PreflightPurpose, PreflightResult, StoreTarget } from '../types.ts';
import type { TargetHints } from './known.ts';
import { lockVersionOf, targetPlace } from './lock/target.ts';
import type { LockContext } from './lock/value.ts';
import { currentVersionOf, describeTarget } from './records.ts';
import { TAG_PREFLIGHT } from './record-tags.ts';
import { isSecretArn } from './target.ts';
import { AWS_VERSIONS_PER_SECRET, VERSIONS_PER_ROTATION } from './quotas.ts';

export interface PreflightContext extends LockContext {
  createIfMissing: boolean;
  /** The secret's version quota (AwsQuotas.versionsPerSecret). */
  versionsPerSecret?: number;
  /** Where to note what the target looked like (the lock, intent and write calls choose by it). */
  targets: TargetHints;
}

/** A value no one stores: sent only with a token AWS is certain to refuse. */
const PROBE_VALUE = 'keyroll-preflight-probe (never stored)';
/** A staging label keyroll never attaches: the stage probe removes it from a version without it. */
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

const DAY_MS = 24 * 3600_000;

/**
 * Throws KR_BACKEND_VERSION_QUOTA when the versions AWS keeps of `path` (created in the last 24 h,
 * or labelled) leave no room for a rotation's own (VERSIONS_PER_ROTATION): nothing is locked or
 * rolled. The message says how many, and when the oldest young one stops counting.
 */
async function checkVersionRoom(context: PreflightContext, path: string): Promise<void> {
  const limit = context.versionsPerSecret ?? AWS_VERSIONS_PER_SECRET;
  const now = context.now().getTime();
  const versions = await context.calls.listVersions('preflight', path);
  const young = versions.filter((v) => v.createdAt !== undefined && now - v.createdAt.getTime() < DAY_MS);
  const kept = versions.filter((v) => v.labelled || young.includes(v)).length;
  if (kept + VERSIONS_PER_ROTATION <= limit) return;
  const oldestYoung = young
    .filter((v) => !v.labelled)
    .reduce<number | undefined>(
      (oldest, v) => Math.min(oldest ?? Infinity, v.createdAt?.getTime() ?? Infinity),
      undefined,
    );
  const frees =
    oldestYoung === undefined
      ? ''
      : `; the oldest of them stops counting at ${new Date(oldestYoung + DAY_MS).toISOString()}`;
  throw new BackendError(
    'KR_BACKEND_VERSION_QUOTA',
    `aws secret ${path} holds ${String(kept)} versions AWS will not remove (created in the last 24 h or labelled) of the ${String(limit)} it allows; a rotation adds up to ${String(VERSIONS_PER_ROTATION)}, so it is not started (nothing locked or rolled)${frees}`,
    { backend: context.backendName, kind: 'aws', operation: 'preflight', path },
  );
}

// eslint-disable-next-line max-lines-per-function -- one probe per permission a rotation needs, in the order it needs them, each answer named beside its probe
export async function preflight(
  context: PreflightContext,
  target: StoreTarget,
  purpose: PreflightPurpose = 'check',
): Promise<PreflightResult> {
  const path = target.path;
  // What the caller does next on this target, and so may prove instead of a probe (above).
  const lockFollows = purpose === 'rotation' || purpose === 'rotation-primary';
  const intentFollows = purpose === 'rotation-primary';
  // Beside the description: a missing secret answers it NotFound too, and its answer waits until
  // the description has said whether the secret exists at all.
  const lockRead: Promise<{ error: unknown } | undefined> = targetPlace(context, path)
    .read('preflight')
    .then(
      () => undefined,
      (error: unknown) => ({ error }),
    );
  const description = await describeTarget(context, path, 'preflight');
  const checks = ['credentials accepted (secretsmanager:DescribeSecret)'];

  if (description === undefined) {
    await lockRead;
    if (isSecretArn(path))
      throw notFound(context, path, 'does not exist (and a secret cannot be created from an ARN)');
    if (!context.createIfMissing)
      throw notFound(context, path, 'does not exist and createIfMissing is off for this backend');
    checks.push(`${path} does not exist yet; the first write creates it (createIfMissing)`);
    return { exists: false, checks };
  }
  if (description.DeletedDate !== undefined) {
    await lockRead;
    throw notFound(
      context,
      path,
      'is scheduled for deletion: restore it (RestoreSecret) or choose another name',
    );
  }

  const current = currentVersionOf(description);
  const lockOnTarget = lockVersionOf(description.VersionIdsToStages) !== undefined;
  // The lock taken next lives on the target (it has a value) and its CAS is the fenced write's two calls.
  const lockProves = lockFollows && current !== undefined;
  const probes: Promise<unknown>[] = [
    lockRead.then((failed) => {
      // No version carries the lock's label: the read passed IAM all the same.
      if (
        failed !== undefined &&
        !(failed.error instanceof BackendError && failed.error.code === 'KR_BACKEND_NOT_FOUND')
      )
        throw failed.error;
    }),
  ];
  if (!intentFollows)
    probes.push(
      context.calls.tagResource('preflight', path, [
        { Key: TAG_PREFLIGHT, Value: context.now().toISOString() },
      ]),
    );
  if (lockProves) probes.push(checkVersionRoom(context, path));
  if (current !== undefined && (!lockProves || !lockOnTarget))
    probes.push(context.calls.probeStageUpdate('preflight', path, current, PROBE_STAGE));
  if (current !== undefined && !lockProves) {
    probes.push(
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
    checks.push(
      `${path} exists without a value; the first write adds it (PutSecretValue not provable without a version)`,
    );
  } else if (lockProves) {
    checks.push(
      `room for a rotation's versions on ${path} (secretsmanager:ListSecretVersionIds)`,
      `secretsmanager:PutSecretValue on ${path}: proven before the roll by the key lock's own version there (encrypted with the secret's KMS key)`,
      lockOnTarget
        ? `secretsmanager:UpdateSecretVersionStage on ${path}: proven before the roll by the key lock's move there (the fenced write's move of AWSCURRENT)`
        : `secretsmanager:UpdateSecretVersionStage allowed on ${path} (the fenced write's move of AWSCURRENT; probe changed no label)`,
    );
  } else {
    checks.push(
      `secretsmanager:PutSecretValue allowed on ${path} (probe refused without storing)`,
      `secretsmanager:UpdateSecretVersionStage allowed on ${path} (the fenced write's move of AWSCURRENT; probe changed no label)`,
    );
  }
  checks.push(
    'secretsmanager:GetSecretValue allowed (read-back)',
    intentFollows
      ? 'secretsmanager:TagResource: proven by the intent marker before the roll'
      : 'secretsmanager:TagResource allowed (intent marker)',
  );
  // The rotation setting is pointed out to a person checking the target, not to a rotation.
  if (purpose === 'check-native') {
    if (description.RotationEnabled !== true) {
      checks.push(
        `warning: ${path} is for AWS-native rotation (scheduler: aws-native) but has no rotation enabled; run keyroll aws enable-rotation for its key`,
      );
    }
  } else if (purpose === 'check' && description.RotationEnabled === true) {
    checks.push(
      `warning: ${path} also has AWS-native rotation enabled; its rotation function would replace keyroll's secret`,
    );
  }
  if (
    context.kmsKeyId !== undefined &&
    description.KmsKeyId !== undefined &&
    description.KmsKeyId !== context.kmsKeyId
  ) {
    checks.push(
      `note: ${path} is encrypted with KMS key ${description.KmsKeyId}; the configured kmsKeyId applies only to secrets keyroll creates`,
    );
  }
  return { exists: current !== undefined, checks };
}
