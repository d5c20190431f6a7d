// Which policy entry a rotation event names, by where the secret lives and not only by its name.
// Secrets Manager sends the secret's ARN; the policy names its destination by name (the backend's
// region, the function's own account) or by ARN. A name alone matches `keyroll/billing` in every
// account and region, so an event for another account's or region's secret of that name would
// rotate this account's one: the ARN's partition, region and account must be the destination's.
import { primaryDestination, type KeyPolicy, type Policy } from '../policy/public/schema.ts';
import { NativeRotationError } from './errors.ts';

/** Where something lives in AWS; a field left out is not known (and so not compared). */
export interface AwsLocation {
  partition?: string | undefined;
  region?: string | undefined;
  account?: string | undefined;
}

/** A Secrets Manager secret ARN, split: `arn:<partition>:secretsmanager:<region>:<account>:secret:<name>-<6 chars>`. */
export interface SecretArn {
  partition: string;
  region: string;
  account: string;
  name: string;
}

export function parseSecretArn(id: string): SecretArn | undefined {
  const match = /^arn:([^:]+):secretsmanager:([^:]*):([^:]*):secret:(.+)-[A-Za-z0-9]{6}$/.exec(id);
  if (match === null) return undefined;
  const [, partition = '', region = '', account = '', name = ''] = match;
  return { partition, region, account, name };
}

/**
 * Where the function runs: partition, region and account from its own ARN (the Lambda context's
 * `invokedFunctionArn`), the region from AWS_REGION (set by Lambda) when the ARN is not known.
 */
export function functionLocation(functionArn: string | undefined, env: NodeJS.ProcessEnv): AwsLocation {
  const match =
    functionArn === undefined ? null : /^arn:([^:]+):lambda:([^:]+):([0-9]+):function:/.exec(functionArn);
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  if (match === null) return { region: region === '' ? undefined : region };
  const [, partition, functionRegion, account] = match;
  return { partition, region: functionRegion, account };
}

/**
 * Where the entry's destination is: its path's own ARN when the policy gives one (a secret of
 * another account, reached through its resource policy), else the backend's region (or the
 * function's, as the SDK falls back to it) in the function's own account and partition.
 */
export function destinationLocation(policy: Policy, key: KeyPolicy, fn: AwsLocation): AwsLocation {
  const destination = primaryDestination(key);
  const arn = parseSecretArn(destination.target.path);
  if (arn !== undefined) return arn;
  const backend = Object.hasOwn(policy.backends, destination.backend)
    ? policy.backends[destination.backend]
    : undefined;
  const region = backend?.kind === 'aws' && backend.region !== undefined ? backend.region : fn.region;
  return { partition: fn.partition, region, account: fn.account };
}

const FIELDS = ['partition', 'region', 'account'] as const;

/** What differs between the secret's ARN and where the destination is, as `field X (the destination's: Y)`. */
export function locationMismatches(arn: SecretArn, expected: AwsLocation): string[] {
  return FIELDS.flatMap((field) => {
    const want = expected[field];
    return want === undefined || want === arn[field]
      ? []
      : [`${field} ${arn[field]} (the destination's: ${want})`];
  });
}

/** Whether `path` (a policy destination path: a name or an ARN) names the secret called `name`. */
function namesSecret(path: string, secretId: string, name: string | undefined): boolean {
  if (path === secretId) return true;
  const pathName = parseSecretArn(path)?.name ?? path;
  return name !== undefined && pathName === name;
}

/** The aws-native entries whose destination has the name of the secret `secretId` names (an ARN, or a name). */
export function nativeKeysNamed(policy: Policy, secretId: string): KeyPolicy[] {
  const name = parseSecretArn(secretId)?.name;
  return policy.keys.filter((key) => {
    const path = primaryDestination(key).target.path;
    return key.scheduler === 'aws-native' && namesSecret(path, secretId, name);
  });
}

/**
 * The aws-native entry whose destination is the secret `secretId` names: by name, and, for an
 * ARN, in the destination's partition, region and account. Throws KR_NATIVE_NOT_CONFIGURED when
 * no entry has the name, KR_NATIVE_ARN_MISMATCH when entries have it but live elsewhere.
 */
export function nativeKeyFor(policy: Policy, secretId: string, fn: AwsLocation): KeyPolicy {
  const named = nativeKeysNamed(policy, secretId);
  const arn = parseSecretArn(secretId);
  const found =
    arn === undefined
      ? named[0]
      : named.find((key) => locationMismatches(arn, destinationLocation(policy, key, fn)).length === 0);
  if (found !== undefined) return found;
  const [first] = named;
  if (first === undefined || arn === undefined) {
    throw new NativeRotationError(
      'KR_NATIVE_NOT_CONFIGURED',
      `no key of policy ${policy.file} has scheduler: aws-native with the secret ${secretId} as its destination; nothing was rolled (add the entry, or turn rotation off with keyroll aws disable-rotation)`,
    );
  }
  const differences = locationMismatches(arn, destinationLocation(policy, first, fn)).join(', ');
  throw new NativeRotationError(
    'KR_NATIVE_ARN_MISMATCH',
    `the secret ${secretId} has the name of key ${first.id}'s destination but lives elsewhere: ${differences}; nothing was rolled (a secret of another account or region is never rotated in this one's place: name its ARN as the destination path, or deploy the function where the secret is)`,
  );
}
