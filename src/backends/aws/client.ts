// One SecretsManagerClient per backend instance, behind a few typed calls that map every SDK
// error to a BackendError. The SDK is imported on first use, not at module load: `keyroll run`
// with only Vault or file destinations never pays for it, and a benchmark of process start to
// first roll loads it only when an AWS destination is preflighted.
import { pinSecretValue } from '../../audit/public/sanitize.ts';
import type {
  CreateSecretCommandInput,
  CreateSecretCommandOutput,
  CancelRotateSecretCommandOutput,
  RotateSecretCommandInput,
  RotateSecretCommandOutput,
  DescribeSecretCommandOutput,
  GetSecretValueCommandInput,
  GetSecretValueCommandOutput,
  PutSecretValueCommandInput,
  PutSecretValueCommandOutput,
  SecretsManagerClient,
  SecretsManagerClientConfig,
} from '@aws-sdk/client-secrets-manager';
import { BackendError, codeForTransportError, type BackendOperation } from '../errors.ts';
import type { QuotaDeps } from '../quota/observer.ts';
import { awsErrorName, toBackendError } from './errors.ts';
import type { AwsAction } from './errors.ts';
import { AwsPacer, type QuotaReservation } from './pacing.ts';
import { AwsQuotas, type AwsQuotaGroup } from './quotas.ts';

type Sdk = typeof import('@aws-sdk/client-secrets-manager');

/**
 * The SDK module's exports. The SDK is CommonJS: Node's own import() gives its named exports
 * (and the same object as `default`), but the esbuild bundle (scripts/build.ts) turns the dynamic
 * import of a CommonJS chunk into a module with only `default`. Both shapes are accepted.
 */
function sdkExports(loaded: Sdk | { default: Sdk }): Sdk {
  return 'SecretsManagerClient' in loaded ? loaded : loaded.default;
}

/** Static credentials, for tests only: production uses the SDK's default chain (env, IRSA, profile, instance role). */
export interface AwsStaticCredentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

/** Static keys or a credential provider function, as the SDK takes them (tests only). */
export type AwsCredentialsInput = NonNullable<SecretsManagerClientConfig['credentials']>;

export interface AwsClientOptions {
  /** The policy's name for the backend instance (for errors). */
  backendName: string;
  region?: string | undefined;
  endpoint?: string | undefined;
  timeoutMs: number;
  /** Unset in production: the SDK's default chain (env, IRSA, profile, instance role). */
  credentials?: AwsCredentialsInput | undefined;
  /** Absent: AWS's documented quotas (quotas.ts). */
  quotas?: AwsQuotas | undefined;
  quotaDeps?: QuotaDeps | undefined;
}

/**
 * The SDK's own retries, per call. Two attempts absorb one dropped connection or 5xx on reads,
 * tags and lock calls; the rotation engine retries failed writes itself with backoff and
 * fallbacks, so more SDK attempts would only stretch the exposure window (invariant 4). A retried
 * PutSecretValue resends the same ClientRequestToken, so an SDK retry can never add a version.
 * A throttle answer is never the SDK's to retry: the pacer (pacing.ts) waits it out, counted, and
 * slows every caller of the same quota, not only the one that met it.
 */
export const SDK_MAX_ATTEMPTS = 2;

type SdkRetryStrategy = Extract<
  NonNullable<SecretsManagerClientConfig['retryStrategy']>,
  { acquireInitialRetryToken: unknown }
>;
type SdkRetryToken = Awaited<ReturnType<SdkRetryStrategy['acquireInitialRetryToken']>>;

function sdkRetryToken(count: number, delayMs: number): SdkRetryToken {
  return { getRetryCount: () => count, getRetryDelay: () => delayMs };
}

/** Transport failures and 5xx (the SDK's TRANSIENT) once more after 50-150 ms; nothing else. */
export const sdkRetryStrategy: SdkRetryStrategy = {
  acquireInitialRetryToken: () => Promise.resolve(sdkRetryToken(0, 0)),
  refreshRetryTokenForRetry: (token, info) => {
    const attempts = token.getRetryCount() + 1;
    if (info.errorType !== 'TRANSIENT' || attempts >= SDK_MAX_ATTEMPTS)
      return Promise.reject(new Error('no retry'));
    return Promise.resolve(sdkRetryToken(attempts, 50 + Math.round(Math.random() * 100)));
  },
  recordSuccess: () => undefined,
};

/**
 * The SDK fetches new credentials before a request whenever the ones it holds expire within 5
 * minutes (EXPIRATION_MS in @smithy/core, credentialsTreatedAsExpired in the default chain).
 * Credentials that must carry a request without a fetch first must outlive that window too.
 */
export const SDK_CREDENTIAL_REFRESH_WINDOW_MS = 300_000;

export class SecretsManagerCalls {
  readonly #options: AwsClientOptions;
  readonly #pacer: AwsPacer;
  #loaded: Promise<{ sdk: Sdk; client: SecretsManagerClient }> | undefined;

  constructor(options: AwsClientOptions) {
    this.#options = options;
    this.#pacer = new AwsPacer({
      backendName: options.backendName,
      quotas: options.quotas ?? AwsQuotas.parse({}),
      deps: options.quotaDeps ?? {},
      // The quota is the account's in one region: the endpoint and the region the SDK resolved.
      scope: async () => {
        let region = 'unknown-region';
        try {
          region = await (await this.#load()).client.config.region();
        } catch {
          // No region anywhere: every call fails on it anyway (errors.ts says so).
        }
        return `${options.endpoint ?? 'aws'} ${region}`;
      },
    });
  }

  /**
   * Takes the turns of calls on `secretId` now (before a roll), so they are sent without a wait
   * later, when they run inside the reservation's `use`.
   */
  reserve(
    secretId: string,
    counts: Partial<Record<AwsQuotaGroup, number>>,
    operation: BackendOperation = 'write',
  ): Promise<QuotaReservation> {
    return this.#pacer.reserve(secretId, counts, operation);
  }

  describeSecret(operation: BackendOperation, secretId: string): Promise<DescribeSecretCommandOutput> {
    return this.#call(operation, 'DescribeSecret', secretId, (client, sdk) =>
      client.send(new sdk.DescribeSecretCommand({ SecretId: secretId })),
    );
  }

  /**
   * Every version of `secretId`, unlabeled ones included (IncludeDeprecated), with its creation
   * time and labels: one request for up to 100 versions, a page more for each further 100.
   */
  async listVersions(
    operation: BackendOperation,
    secretId: string,
  ): Promise<{ createdAt: Date | undefined; labelled: boolean }[]> {
    const versions: { createdAt: Date | undefined; labelled: boolean }[] = [];
    let nextToken: string | undefined;
    // A secret holds about 100 versions (AWS prunes past that): a few pages at most, bounded anyway.
    for (let page = 0; page < 10; page++) {
      const token = nextToken;
      const answer = await this.#call(operation, 'ListSecretVersionIds', secretId, (client, sdk) =>
        client.send(
          new sdk.ListSecretVersionIdsCommand({
            SecretId: secretId,
            IncludeDeprecated: true,
            MaxResults: 100,
            ...(token === undefined ? {} : { NextToken: token }),
          }),
        ),
      );
      for (const version of answer.Versions ?? [])
        versions.push({ createdAt: version.CreatedDate, labelled: (version.VersionStages ?? []).length > 0 });
      nextToken = answer.NextToken;
      if (nextToken === undefined || nextToken === '') break;
    }
    return versions;
  }

  getSecretValue(
    operation: BackendOperation,
    input: GetSecretValueCommandInput & { SecretId: string },
  ): Promise<GetSecretValueCommandOutput> {
    return this.#call(operation, 'GetSecretValue', input.SecretId, (client, sdk) =>
      client.send(new sdk.GetSecretValueCommand(input)),
    );
  }

  putSecretValue(
    operation: BackendOperation,
    input: PutSecretValueCommandInput & { SecretId: string },
  ): Promise<PutSecretValueCommandOutput> {
    return this.#call(operation, 'PutSecretValue', input.SecretId, (client, sdk) =>
      client.send(new sdk.PutSecretValueCommand(input)),
    );
  }

  createSecret(
    operation: BackendOperation,
    input: CreateSecretCommandInput & { Name: string },
  ): Promise<CreateSecretCommandOutput> {
    return this.#call(operation, 'CreateSecret', input.Name, (client, sdk) =>
      client.send(new sdk.CreateSecretCommand(input)),
    );
  }

  /**
   * Moves AWSCURRENT from `fromVersionId` to `toVersionId`: a compare-and-swap, because AWS
   * refuses the move when AWSCURRENT is no longer on `fromVersionId`. Returns 'stale' then.
   * Without `fromVersionId` (a secret that had no current version), AWS refuses the move when some
   * version carries AWSCURRENT by now. Either way AWS moves AWSPREVIOUS to the version it left.
   */
  async moveCurrentStage(
    operation: BackendOperation,
    secretId: string,
    fromVersionId: string | undefined,
    toVersionId: string,
  ): Promise<'moved' | 'stale'> {
    return this.moveStage(operation, secretId, 'AWSCURRENT', fromVersionId, toVersionId);
  }

  /**
   * Moves the staging label `stage` from `fromVersionId` to `toVersionId`, as a compare-and-swap:
   * AWS (and moto) refuse the move when `fromVersionId` no longer carries the label ('stale').
   * Without `fromVersionId`, AWS refuses it when another version carries the label (moto does not
   * check that for labels other than AWSCURRENT: keyroll never relies on it there).
   */
  async moveStage(
    operation: BackendOperation,
    secretId: string,
    stage: string,
    fromVersionId: string | undefined,
    toVersionId: string,
  ): Promise<'moved' | 'stale'> {
    const moved = await this.#updateStage(operation, secretId, {
      VersionStage: stage,
      ...(fromVersionId === undefined ? {} : { RemoveFromVersionId: fromVersionId }),
      MoveToVersionId: toVersionId,
    });
    return moved ? 'moved' : 'stale';
  }

  /**
   * One staging label moved or removed (AWS-native rotation's AWSPENDING, src/backends/aws/native/rotation.ts):
   * 'stale' when AWS refused it as invalid now (the label is no longer where `RemoveFromVersionId` says).
   */
  async updateStage(
    operation: BackendOperation,
    secretId: string,
    input: { VersionStage: string; RemoveFromVersionId?: string; MoveToVersionId?: string },
  ): Promise<'moved' | 'stale'> {
    return (await this.#updateStage(operation, secretId, input)) ? 'moved' : 'stale';
  }

  /** Turns AWS-native rotation on (the rotation function and its schedule). */
  rotateSecret(
    operation: BackendOperation,
    input: RotateSecretCommandInput & { SecretId: string },
  ): Promise<RotateSecretCommandOutput> {
    return this.#call(operation, 'RotateSecret', input.SecretId, (client, sdk) =>
      client.send(new sdk.RotateSecretCommand(input)),
    );
  }

  /** Turns AWS-native rotation off. */
  cancelRotateSecret(
    operation: BackendOperation,
    secretId: string,
  ): Promise<CancelRotateSecretCommandOutput> {
    return this.#call(operation, 'CancelRotateSecret', secretId, (client, sdk) =>
      client.send(new sdk.CancelRotateSecretCommand({ SecretId: secretId })),
    );
  }

  /**
   * Proves that UpdateSecretVersionStage passes IAM on `secretId` without changing a label: asks
   * to remove `label` from `versionId`, which does not carry it. AWS checks IAM first, then either
   * refuses the request (InvalidParameterException) or has nothing to remove; both prove the action.
   */
  async probeStageUpdate(
    operation: BackendOperation,
    secretId: string,
    versionId: string,
    label: string,
  ): Promise<void> {
    await this.#updateStage(operation, secretId, { VersionStage: label, RemoveFromVersionId: versionId });
  }

  /** UpdateSecretVersionStage: true when done, false when AWS refused it as invalid now (a stale CAS). */
  async #updateStage(
    operation: BackendOperation,
    secretId: string,
    input: { VersionStage: string; RemoveFromVersionId?: string; MoveToVersionId?: string },
  ): Promise<boolean> {
    try {
      const { client, sdk } = await this.#load();
      await this.#pacer.send({ action: 'UpdateSecretVersionStage', operation, path: secretId }, () =>
        client.send(new sdk.UpdateSecretVersionStageCommand({ SecretId: secretId, ...input })),
      );
      return true;
    } catch (error) {
      const mapped = toBackendError(error, {
        backend: this.#options.backendName,
        operation,
        action: 'UpdateSecretVersionStage',
        path: secretId,
      });
      const name = awsErrorName(error);
      const refused = name === 'InvalidParameterException' || name === 'InvalidRequestException';
      if (refused && mapped.code !== 'KR_BACKEND_SCHEDULED_FOR_DELETION') return false;
      throw mapped;
    }
  }

  async tagResource(
    operation: BackendOperation,
    secretId: string,
    tags: { Key: string; Value: string }[],
  ): Promise<void> {
    await this.#call(operation, 'TagResource', secretId, (client, sdk) =>
      client.send(new sdk.TagResourceCommand({ SecretId: secretId, Tags: tags })),
    );
  }

  /**
   * Makes the client's credentials valid for `minValidityMs` beyond the SDK's own refresh window,
   * forcing the provider chain to fetch new ones (STS for IRSA, the instance role, ...) now
   * when they would not be, so the PutSecretValue after the roll is not preceded by a credential
   * fetch (invariant 2). Uses the SDK's resolved, memoized provider (`config.credentials`, a
   * MemoizedProvider taking `{ forceRefresh }`), whose expiry checks use the real clock.
   * Static credentials (no expiration) need nothing.
   */
  async ensureFreshCredentials(minValidityMs: number): Promise<void> {
    const needed = minValidityMs + SDK_CREDENTIAL_REFRESH_WINDOW_MS;
    const validFor = (expiration: Date | undefined): number =>
      expiration === undefined ? Infinity : expiration.getTime() - Date.now();
    let expiration: Date | undefined;
    // The secret key and session token are credentials like any other: known to the sanitizer
    // for as long as they are valid, so no error text or log line can carry them.
    const pin = (credentials: {
      secretAccessKey: string;
      sessionToken?: string | undefined;
      expiration?: Date | undefined;
    }): Date | undefined => {
      const lifetimeMs =
        credentials.expiration === undefined
          ? undefined
          : Math.max(0, credentials.expiration.getTime() - Date.now());
      pinSecretValue(credentials.secretAccessKey, lifetimeMs);
      if (credentials.sessionToken) pinSecretValue(credentials.sessionToken, lifetimeMs);
      return credentials.expiration;
    };
    try {
      const { client } = await this.#load();
      expiration = pin(await client.config.credentials());
      if (validFor(expiration) >= needed) return;
      expiration = pin(await client.config.credentials({ forceRefresh: true }));
    } catch (error) {
      throw this.#credentialsError(error, 'the SDK could not resolve credentials');
    }
    if (validFor(expiration) < needed) {
      const left = Math.max(0, Math.floor(validFor(expiration) / 1000));
      throw this.#credentialsError(
        undefined,
        `fresh credentials expire in ${String(left)}s, sooner than the ${String(Math.ceil(needed / 1000))}s a rotation needs (including the SDK's 5-minute refresh window)`,
      );
    }
  }

  #credentialsError(cause: unknown, problem: string): BackendError {
    // A provider error names the source that failed (no token file, STS refused), never a key.
    const code =
      cause === undefined ? 'KR_BACKEND_DENIED' : (codeForTransportError(cause) ?? 'KR_BACKEND_DENIED');
    const name = cause === undefined ? '' : ` (${awsErrorName(cause)})`;
    return new BackendError(
      code,
      `aws backend ${this.#options.backendName}: credentials not fresh enough for a rotation: ${problem}${name}`,
      {
        backend: this.#options.backendName,
        kind: 'aws',
        operation: 'preflight',
        path: 'credentials',
        ...(cause === undefined ? {} : { cause }),
      },
    );
  }

  /** Closes the client's sockets; a later call opens a new client. */
  async close(): Promise<void> {
    const loaded = this.#loaded;
    this.#loaded = undefined;
    if (loaded === undefined) return;
    try {
      (await loaded).client.destroy();
    } catch {
      // The SDK failed to load: nothing to close.
    }
  }

  async #call<T>(
    operation: BackendOperation,
    action: AwsAction,
    path: string,
    run: (client: SecretsManagerClient, sdk: Sdk) => Promise<T>,
  ): Promise<T> {
    try {
      const { client, sdk } = await this.#load();
      return await this.#pacer.send({ action, operation, path }, () => run(client, sdk));
    } catch (error) {
      throw toBackendError(error, { backend: this.#options.backendName, operation, action, path });
    }
  }

  #load(): Promise<{ sdk: Sdk; client: SecretsManagerClient }> {
    this.#loaded ??= import('@aws-sdk/client-secrets-manager').then((loaded) => {
      const sdk = sdkExports(loaded);
      const { region, endpoint, timeoutMs, credentials } = this.#options;
      const client = new sdk.SecretsManagerClient({
        ...(region === undefined ? {} : { region }),
        ...(endpoint === undefined ? {} : { endpoint }),
        ...(credentials === undefined ? {} : { credentials }),
        maxAttempts: SDK_MAX_ATTEMPTS,
        retryStrategy: sdkRetryStrategy,
        // Without throwOnRequestTimeout the SDK only logs a slow request and waits for ever.
        requestHandler: {
          connectionTimeout: timeoutMs,
          requestTimeout: timeoutMs,
          throwOnRequestTimeout: true,
        },
      });
      return { sdk, client };
    });
    return this.#loaded;
  }
}
