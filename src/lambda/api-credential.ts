// keyroll's own API credential in the rotation function, read from Secrets Manager at run time.
// A value in the function's environment (a CloudFormation dynamic reference resolved at deploy
// time) is plain text to anyone who may call lambda:GetFunctionConfiguration or open the console;
// the environment holds only the secret's ARN (KEYROLL_API_TOKEN_SECRET_ARN), and the function
// reads the value itself with GetSecretValue (AWSCURRENT) when the API first needs it:
//   - once per container, then again after API_TOKEN_CACHE_MS, so a rotated credential is picked up;
//   - at once when the API answers 401 for it (the API client drops the token and retries once);
//   - registered with the sanitizer before anything else sees it (invariant 3), and handed to the
//     policy's `env:KEYROLL_API_TOKEN` through the function's own environment object, never process.env.
import { performance } from 'node:perf_hooks';
import type { CredentialProvider } from '../api/public/credentials.ts';
import { Secret } from '../audit/public/secret.ts';
import { readCurrentSecretString } from '../backends/public/aws/current-value.ts';
import { errorMessage } from '../errors.ts';
import { primaryDestination, type KeyPolicy, type Policy } from '../policy/public/schema.ts';
import { credentialFromPolicy, type RuntimeOptions } from '../rotation/public/runtime.ts';
import { NativeRotationError } from './errors.ts';

/** The function's environment variable naming the secret that holds keyroll's API credential. */
export const API_TOKEN_SECRET_ARN_ENV = 'KEYROLL_API_TOKEN_SECRET_ARN';
/** Where the value is handed to the policy (`credential: { type: bearer, token: env:KEYROLL_API_TOKEN }`). */
export const API_TOKEN_ENV = 'KEYROLL_API_TOKEN';
/** How long a container reuses the value it read: a rotated credential is used at most this much later. */
export const API_TOKEN_CACHE_MS = 5 * 60_000;

/** The value one container read last, and when (monotonic ms). */
export class ApiTokenCache {
  #entry: { arn: string; token: Secret; readAtMs: number } | undefined;

  async get(arn: string, read: () => Promise<Secret>, nowMs: number): Promise<Secret> {
    const entry = this.#entry;
    if (entry?.arn === arn && nowMs - entry.readAtMs < API_TOKEN_CACHE_MS) return entry.token;
    const token = await read();
    this.#entry = { arn, token, readAtMs: nowMs };
    return token;
  }

  /** The API refused the value: the next get() reads the secret again. */
  invalidate(arn: string): void {
    if (this.#entry?.arn === arn) this.#entry = undefined;
  }
}

/** Lives as long as the Lambda container (module scope): warm invocations reuse the value. */
export const containerApiTokens = new ApiTokenCache();

export interface SecretApiCredentialOptions {
  arn: string;
  /** The policy's credential, resolving its `env:` references from `env`. */
  base: CredentialProvider;
  /** The function's own environment object (a copy): the value is set here as KEYROLL_API_TOKEN. */
  env: NodeJS.ProcessEnv;
  read: () => Promise<Secret>;
  cache?: ApiTokenCache;
  monotonicMs?: () => number;
}

/** The policy's credential, with KEYROLL_API_TOKEN read from the secret before each use (cached). */
export function secretApiCredential(options: SecretApiCredentialOptions): CredentialProvider {
  const { arn, base, env, read } = options;
  const cache = options.cache ?? containerApiTokens;
  const monotonicMs = options.monotonicMs ?? (() => performance.now());
  return {
    description: `${base.description}, read from Secrets Manager secret ${arn}`,
    token: async () => {
      const token = await cache.get(arn, read, monotonicMs());
      env[API_TOKEN_ENV] = token.reveal();
      return base.token();
    },
    invalidate: () => {
      cache.invalidate(arn);
      base.invalidate?.();
    },
  };
}

export interface ApiTokenReaderConfig {
  endpoint?: string | undefined;
  region?: string | undefined;
  timeoutMs: number;
  /** The function's environment: static AWS keys in it are used when it is not process.env (tests). */
  env: NodeJS.ProcessEnv;
}

/**
 * Where the credential is read: the endpoint and timeout of the rotated secret's own aws backend
 * (a VPC endpoint for one is the way out for the other), in the region the ARN names.
 */
export function apiTokenReaderConfig(
  policy: Policy,
  key: KeyPolicy,
  env: NodeJS.ProcessEnv,
): ApiTokenReaderConfig {
  const config = policy.backends[primaryDestination(key).backend];
  const aws = config?.kind === 'aws' ? config : undefined;
  return { endpoint: aws?.endpoint, region: aws?.region, timeoutMs: aws?.timeoutMs ?? 10_000, env };
}

/** `arn:<partition>:secretsmanager:<region>:…`: the region a secret ARN lives in. */
function regionOfArn(arn: string): string | undefined {
  const region = /^arn:[^:]+:secretsmanager:([^:]+):/.exec(arn)?.[1];
  return region === '' ? undefined : region;
}

/** One GetSecretValue (AWSCURRENT) of the credential secret; errors name the ARN, never a value. */
export async function readApiToken(arn: string, config: ApiTokenReaderConfig): Promise<Secret> {
  let value: string | undefined;
  try {
    value = await readCurrentSecretString({
      secretId: arn,
      readerName: 'api-credential',
      endpoint: config.endpoint,
      region: regionOfArn(arn) ?? config.region,
      timeoutMs: config.timeoutMs,
      env: config.env,
    });
  } catch (error) {
    // A BackendError of GetSecretValue keeps no AWS message or cause (it could echo a value).
    throw new NativeRotationError(
      'KR_NATIVE_API_CREDENTIAL_UNREADABLE',
      `keyroll's API credential could not be read from ${arn} (${API_TOKEN_SECRET_ARN_ENV}): ${errorMessage(error)}; nothing was rolled`,
      { cause: error },
    );
  }
  if (value === undefined || value === '') {
    throw new NativeRotationError(
      'KR_NATIVE_API_CREDENTIAL_UNREADABLE',
      `keyroll's API credential at ${arn} (${API_TOKEN_SECRET_ARN_ENV}) has no SecretString at AWSCURRENT; nothing was rolled`,
    );
  }
  // Pinned like every resolved reference: a long-lived credential, blanked for good.
  return new Secret(value).pinned();
}

/**
 * The credential the function's runtime uses: read from the secret KEYROLL_API_TOKEN_SECRET_ARN
 * names when it is set (and no caller passed one), else undefined (the policy's reference as is).
 */
export function functionApiCredential(
  policy: Policy,
  key: KeyPolicy,
  env: NodeJS.ProcessEnv,
  runtime: Partial<RuntimeOptions> = {},
): CredentialProvider | undefined {
  const arn = env[API_TOKEN_SECRET_ARN_ENV];
  if (arn === undefined || arn === '' || runtime.credentials !== undefined) return undefined;
  // A copy: the value lives in this object only, never in process.env (which child processes,
  // crash reports and the Lambda runtime's own diagnostics may read).
  const own: NodeJS.ProcessEnv = { ...env };
  const config = apiTokenReaderConfig(policy, key, env);
  return secretApiCredential({
    arn,
    base: credentialFromPolicy(policy, runtime.dispatcher, own),
    env: own,
    read: () => readApiToken(arn, config),
    ...(runtime.monotonicMs ? { monotonicMs: runtime.monotonicMs } : {}),
  });
}
