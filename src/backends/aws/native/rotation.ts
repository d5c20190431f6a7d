// AWS-native rotation (src/lambda/): the calls on a secret's staging labels that Secrets Manager's
// four rotation steps need and the rest of the backend never makes. The value of a native rotation
// is put with the event's ClientRequestToken and the label AWSPENDING (not KEYROLL_PENDING, not
// AWSCURRENT): consumers keep reading AWSCURRENT until finishSecret moves it. Every call here is
// safe to repeat, as AWS retries each step: a put with the same token and value creates no second
// version (invariant 8), and a label already moved or removed is answered `stale`, not an error.
import { BackendError } from '../../errors.ts';
import {
  AWS_PENDING,
  type NativeRotation,
  type NativeRotationView,
  type RotationRules,
} from '../../native.ts';
import type { Backend, StoreTarget, StoredSecret, WriteResult } from '../../types.ts';
import type { SecretsManagerCalls } from '../client.ts';
import { pendingDestinationBackend } from './pending-destination.ts';
import { readStoredVersion } from '../write.ts';

export class AwsNativeRotation implements NativeRotation {
  readonly #calls: SecretsManagerCalls;
  readonly #backendName: string;

  constructor(calls: SecretsManagerCalls, backendName: string) {
    this.#calls = calls;
    this.#backendName = backendName;
  }

  async describe(secretId: string): Promise<NativeRotationView> {
    const answer = await this.#calls.describeSecret('state', secretId);
    const versions: Record<string, string[]> = {};
    for (const [id, stages] of Object.entries(answer.VersionIdsToStages ?? {})) versions[id] = [...stages];
    const rules = answer.RotationRules;
    return {
      arn: answer.ARN ?? secretId,
      name: answer.Name ?? secretId,
      versions,
      rotationEnabled: answer.RotationEnabled === true,
      ...(answer.RotationLambdaARN ? { rotationLambdaArn: answer.RotationLambdaARN } : {}),
      ...(rules
        ? {
            rotationRules: {
              ...(rules.AutomaticallyAfterDays === undefined
                ? {}
                : { automaticallyAfterDays: rules.AutomaticallyAfterDays }),
              ...(rules.ScheduleExpression === undefined
                ? {}
                : { scheduleExpression: rules.ScheduleExpression }),
            },
          }
        : {}),
    };
  }

  /**
   * Invariant 2 and 8: the one request after the roll. PutSecretValue with the event's token and
   * only the label AWSPENDING, so AWSCURRENT (what consumers read) does not move before finishSecret.
   */
  async putPending(path: string, value: string, token: string): Promise<WriteResult> {
    try {
      const answer = await this.#calls.putSecretValue('write', {
        SecretId: path,
        SecretString: value,
        ClientRequestToken: token,
        VersionStages: [AWS_PENDING],
      });
      return { version: answer.VersionId ?? token, alreadyApplied: false };
    } catch (error) {
      // A token already used with another value: never this rotation's own repeat (same value).
      if (error instanceof BackendError && error.code === 'KR_BACKEND_CONFLICT') {
        throw new BackendError(
          'KR_BACKEND_CONFLICT',
          `aws secret ${path} already has version ${token} with a different value; AWSPENDING was not written`,
          {
            backend: this.#backendName,
            kind: 'aws',
            operation: 'write',
            path,
          },
        );
      }
      throw error;
    }
  }

  /** The value of version `versionId`, parsed with the destination's shape; undefined when it has none. */
  async readVersion(target: StoreTarget, versionId: string): Promise<StoredSecret | undefined> {
    // No such version, or a version AWS made for the rotation that has no value yet: undefined.
    const stored = await readStoredVersion({ calls: this.#calls }, target, { VersionId: versionId });
    return stored === undefined ? undefined : { ...stored, version: stored.version ?? versionId };
  }

  /** Moves AWSCURRENT from `fromVersionId` to `toVersionId` (AWS moves AWSPREVIOUS to the one it left). */
  async moveCurrent(
    path: string,
    fromVersionId: string | undefined,
    toVersionId: string,
  ): Promise<'moved' | 'stale'> {
    return this.#calls.moveCurrentStage('write', path, fromVersionId, toVersionId);
  }

  /** Removes AWSPENDING from `versionId`; `stale` when it no longer carries it (a repeat). */
  async removePending(path: string, versionId: string): Promise<'moved' | 'stale'> {
    return this.#calls.updateStage('write', path, {
      VersionStage: AWS_PENDING,
      RemoveFromVersionId: versionId,
    });
  }

  async enable(path: string, functionArn: string, rules: RotationRules): Promise<void> {
    // RotateImmediately false: AWS only runs testSecret to check the set-up; the first rotation
    // comes at the schedule's first window, like every later one.
    await this.#calls.rotateSecret('record', {
      SecretId: path,
      RotationLambdaARN: functionArn,
      RotationRules: rules,
      RotateImmediately: false,
    });
  }

  async disable(path: string): Promise<void> {
    await this.#calls.cancelRotateSecret('record', path);
  }

  pendingDestination(backend: Backend, token: string): Backend {
    return pendingDestinationBackend(backend, this, token);
  }
}
