// AWS credentials and the write after the roll (invariant 2), on moto: the SDK fetches new
// credentials before any request once the ones it holds expire within 5 minutes, so without
// ensureFresh the PutSecretValue after the roll could follow an STS call. A provider function
// stands in for the default chain (IRSA's STS call, the instance role) and counts its calls;
// only Date is faked (the SDK judges expiry by Date.now()), timers and sockets stay real.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { AwsBackend } from '../../src/backends/aws/backend.ts';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import type { StoreTarget } from '../../src/backends/types.ts';
import { createTestClock, makeRecord } from '../backends/contract.ts';
import { newTarget, rejection } from './aws-fixtures.ts';
import { describeWithMoto } from '../support/moto.ts';
import type { MotoServer } from './servers.ts';

const MINUTE = 60_000;

interface CountingProvider {
  provider: (options?: {
    forceRefresh?: boolean;
  }) => Promise<{ accessKeyId: string; secretAccessKey: string; expiration: Date }>;
  /** One entry per fetch: whether it was forced. */
  fetches: boolean[];
}

/** Credentials that live `lifetimeMs` from each fetch (moto accepts any keys). */
function countingProvider(server: MotoServer, lifetimeMs: number): CountingProvider {
  const fetches: boolean[] = [];
  return {
    fetches,
    provider: (options) => {
      fetches.push(options?.forceRefresh === true);
      return Promise.resolve({
        accessKeyId: server.accessKeyId,
        secretAccessKey: server.secretAccessKey,
        expiration: new Date(Date.now() + lifetimeMs),
      });
    },
  };
}

describeWithMoto('aws backend: credentials before the roll (moto)', ({ server }) => {
  const backendWith = (
    credentials: CountingProvider['provider'] | { accessKeyId: string; secretAccessKey: string },
  ): AwsBackend =>
    new AwsBackend(
      'aws-credentials',
      AwsBackendConfig.parse({ kind: 'aws', endpoint: server.endpoint, createIfMissing: true }),
      {
        now: createTestClock().now,
        region: server.region,
        credentials,
      },
    );
  /** The test's backend, closed after each test. */
  let opened: AwsBackend | undefined;
  /** A backend on credentials living `lifetimeMs` from each fetch, after a preflight of a new target (the first fetch). */
  async function preflighted(
    lifetimeMs: number,
  ): Promise<{ fetches: boolean[]; backend: AwsBackend; target: StoreTarget }> {
    const counting = countingProvider(server, lifetimeMs);
    const backend = (opened = backendWith(counting.provider));
    const target = newTarget();
    await backend.preflight(target);
    return { fetches: counting.fetches, backend, target };
  }

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
  });
  afterEach(async () => {
    vi.useRealTimers();
    await opened?.close();
    opened = undefined;
  });

  it('without ensureFresh, the SDK fetches credentials right before the put once they near expiry (the hazard)', async () => {
    const { fetches, backend, target } = await preflighted(15 * MINUTE);
    vi.setSystemTime(Date.now() + 11 * MINUTE); // 4 minutes left: inside the SDK's 5-minute window
    const rollAnswered = fetches.length;
    await backend.writeSecret(target, makeRecord({ rotationId: randomUUID() }));
    expect(fetches.length).toBeGreaterThan(rollAnswered);
  });

  it('forces the refresh in ensureFresh, so nothing is fetched between the roll answer and the put', async () => {
    const { fetches, backend, target } = await preflighted(15 * MINUTE);
    vi.setSystemTime(Date.now() + 9 * MINUTE); // 6 minutes left: the SDK would still use them
    const beforeRoll = fetches.length;
    await backend.ensureFresh(2 * MINUTE); // 2 minutes + the SDK's 5 > 6 left: refresh now
    expect(fetches.slice(beforeRoll)).toEqual([true]);
    const rollAnswered = fetches.length;
    const record = makeRecord({ rotationId: randomUUID() });
    expect(await backend.writeSecret(target, record)).toEqual({
      version: record.rotationId,
      alreadyApplied: false,
    });
    expect(fetches.length).toBe(rollAnswered);
  });

  it('fetches nothing in ensureFresh while the credentials outlive the time asked for', async () => {
    const { fetches, backend } = await preflighted(60 * MINUTE);
    const beforeRoll = fetches.length;
    await backend.ensureFresh(10 * MINUTE);
    expect(fetches.length).toBe(beforeRoll);
  });

  it('refuses in ensureFresh, before any roll, credentials that even fresh expire too soon', async () => {
    const { backend } = await preflighted(8 * MINUTE);
    const error = await rejection(backend.ensureFresh(10 * MINUTE));
    expect(error).toMatchObject({ code: 'KR_BACKEND_DENIED', kind: 'aws', retryable: false });
    expect(error.message).toMatch(/expire in \d+s, sooner than the 900s/);
  });

  it('needs nothing for static keys, which do not expire', async () => {
    const backend = (opened = backendWith({
      accessKeyId: server.accessKeyId,
      secretAccessKey: server.secretAccessKey,
    }));
    await expect(backend.ensureFresh(60 * MINUTE)).resolves.toBeUndefined();
  });
});
