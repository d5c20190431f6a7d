// Shared by the AWS integration tests: backends and raw SDK clients pointed at moto, fresh
// target names, and a helper that expects a BackendError.
import { randomUUID } from 'node:crypto';
import { DescribeSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import { SecretsManagerCalls } from '../../src/backends/aws/client.ts';
import { createAwsBackend } from '../../src/backends/aws/index.ts';
import type { AcquireHints } from '../../src/backends/aws/lock/lock.ts';
import { seenOf } from '../../src/backends/aws/records.ts';
import { BackendError } from '../../src/backends/errors.ts';
import type { Backend, StoreTarget, ValueShape } from '../../src/backends/types.ts';
import type { TestClock } from '../backends/contract.ts';
import type { MotoServer } from './servers.ts';

/** Unique per test process, so reruns against a long-lived moto never collide. */
export const run = randomUUID().slice(0, 8);
let counter = 0;

/** A target path no other test uses. */
export function newTarget(shape: Partial<ValueShape> = {}): StoreTarget {
  counter += 1;
  return {
    path: `keyroll-test/${run}/secret-${String(counter)}`,
    shape: { format: 'raw', secretField: 'apiKey', fields: [], ...shape },
  };
}

/** The moto credentials as the environment a backend is given (the default chain's env source). */
export function motoEnv(server: MotoServer): NodeJS.ProcessEnv {
  return {
    AWS_ACCESS_KEY_ID: server.accessKeyId,
    AWS_SECRET_ACCESS_KEY: server.secretAccessKey,
    AWS_REGION: server.region,
  };
}

export function makeBackend(
  server: MotoServer,
  clock: TestClock,
  config: Partial<AwsBackendConfig> = {},
): Backend {
  const parsed = AwsBackendConfig.parse({
    kind: 'aws',
    endpoint: server.endpoint,
    createIfMissing: true,
    ...config,
  });
  return createAwsBackend('aws-test', parsed, { now: clock.now, env: motoEnv(server) });
}

/** A plain SDK client, to look at what the backend stored. */
export function sdkClient(server: MotoServer): SecretsManagerClient {
  return new SecretsManagerClient({
    endpoint: server.endpoint,
    region: server.region,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
  });
}

export async function rejection(promise: Promise<unknown>): Promise<BackendError> {
  const error: unknown = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(error instanceof BackendError)) throw new Error(`expected a BackendError, got ${String(error)}`);
  return error;
}

/**
 * What aws/lock/lock.ts's acquireLock needs to decide where the lock of `path` lives, for tests that call it
 * with calls of their own: a description made through `sdk` each time it asks.
 */
export function lockHints(sdk: SecretsManagerClient, path: string): AcquireHints {
  return {
    describe: async () => {
      try {
        return seenOf(await sdk.send(new DescribeSecretCommand({ SecretId: path })));
      } catch (error) {
        if (error instanceof Error && error.name === 'ResourceNotFoundException') return seenOf(undefined);
        throw error;
      }
    },
  };
}

/**
 * SDK calls to moto whose label moves (every lock compare-and-swap's second step, AWSCURRENT's
 * included) wait at a gate the test opens: an interleaving a timing race only sometimes produces.
 */
export class GatedCalls extends SecretsManagerCalls {
  readonly arrived: Promise<void>;
  readonly moves: ('moved' | 'stale')[] = [];
  #arrive: () => void = () => undefined;
  #open: () => void = () => undefined;
  readonly #gate: Promise<void>;

  constructor(server: MotoServer) {
    super({
      backendName: 'gated',
      endpoint: server.endpoint,
      region: server.region,
      timeoutMs: 10_000,
      credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    });
    this.arrived = new Promise((resolve) => (this.#arrive = resolve));
    this.#gate = new Promise((resolve) => (this.#open = resolve));
  }

  open(): void {
    this.#open();
  }

  override async moveStage(
    ...args: Parameters<SecretsManagerCalls['moveStage']>
  ): Promise<'moved' | 'stale'> {
    this.#arrive();
    await this.#gate;
    const outcome = await super.moveStage(...args);
    this.moves.push(outcome);
    return outcome;
  }
}
