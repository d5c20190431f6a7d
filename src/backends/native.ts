// The optional port of a backend whose store rotates secrets itself: AWS Secrets Manager's own
// rotation, which calls keyroll's rotation function (src/lambda/, policy `scheduler: aws-native`)
// and which `keyroll aws enable-rotation` turns on. Callers reach it as `backend.native` and find
// it absent on stores without one; they never name a backend's class or import its folder.
import type { Backend, StoreTarget, StoredSecret } from './types.ts';

/** The staging label consumers read: the value in use. */
export const AWS_CURRENT = 'AWSCURRENT';
/** The staging label of a rotation's new value until finishSecret makes it current. */
export const AWS_PENDING = 'AWSPENDING';

/** What the store says of a secret's versions and rotation settings. */
export interface NativeRotationView {
  arn: string;
  name: string;
  /** Version id → its staging labels. */
  versions: Record<string, string[]>;
  rotationEnabled: boolean;
  rotationLambdaArn?: string;
  /** `AutomaticallyAfterDays`, or the `ScheduleExpression`, as DescribeSecret reports them. */
  rotationRules?: { automaticallyAfterDays?: number; scheduleExpression?: string };
}

/** The rotation schedule handed to RotateSecret (src/lambda/schedule.ts derives it from the policy). */
export interface RotationRules {
  AutomaticallyAfterDays?: number;
  ScheduleExpression?: string;
}

/**
 * The calls of the store's own rotation that the rest of the backend never makes: its staging
 * labels, and its schedule. Every call is safe to repeat, as the store retries each step: a
 * label already moved or removed is answered `stale`, not an error.
 */
export interface NativeRotation {
  describe(path: string): Promise<NativeRotationView>;
  /** The value of version `versionId`, parsed with the destination's shape; undefined when it has none. */
  readVersion(target: StoreTarget, versionId: string): Promise<StoredSecret | undefined>;
  /** Moves AWSCURRENT from `fromVersionId` to `toVersionId` (the store moves AWSPREVIOUS to the one it left). */
  moveCurrent(
    path: string,
    fromVersionId: string | undefined,
    toVersionId: string,
  ): Promise<'moved' | 'stale'>;
  /** Removes AWSPENDING from `versionId`; `stale` when it no longer carries it (a repeat). */
  removePending(path: string, versionId: string): Promise<'moved' | 'stale'>;
  /** Turns the store's rotation on with `functionArn` and `rules`; rolls nothing now. */
  enable(path: string, functionArn: string, rules: RotationRules): Promise<void>;
  disable(path: string): Promise<void>;
  /**
   * `backend` (this port's backend, or a wrapper of it) as the engine sees a native rotation's
   * primary destination: everything as is, except that the write after the roll stores the value
   * under AWSPENDING with `token` instead of making it current (invariants 2 and 8: still the one
   * request after the roll answer).
   */
  pendingDestination(backend: Backend, token: string): Backend;
}

/** The version that carries `stage`, if any. */
export function versionWith(view: Pick<NativeRotationView, 'versions'>, stage: string): string | undefined {
  return Object.entries(view.versions).find(([, stages]) => stages.includes(stage))?.[0];
}
