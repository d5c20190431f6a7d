// A loopback proxy in front of moto that enforces AWS Secrets Manager's request quotas as AWS
// documents them ("AWS Secrets Manager quotas": per account and region, none adjustable) and
// answers a request over its quota the way AWS does: HTTP 400, `x-amzn-ErrorType:
// ThrottlingException` and the JSON body `{"__type":"ThrottlingException","message":"Rate
// exceeded"}`, which the AWS SDK reads as a ThrottlingException. moto enforces no quota at all,
// so without this nothing in the tests or benchmarks would ever meet one.
// Each quota group is a token bucket holding one second of its rate (AWS does not document its
// burst; one second is the common shape), refilled continuously. The groups are written out here
// from AWS's documentation, not taken from keyroll's own table (src/backends/aws/quotas.ts): the
// proxy is what keyroll is checked against.
// Fault cases can also make the next calls of some groups be refused outright (`refuseNext`).
// It also keeps AWS's quota of versions per secret: AWS removes unlabeled versions past 100 but
// never one created in the last 24 hours, and refuses a PutSecretValue over that with HTTP 400
// `LimitExceededException` (moto keeps every version and refuses none).
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Agent, request } from 'undici';

export type QuotaGroup = 'write' | 'tag' | 'read' | 'create' | 'other';

/** AWS's groups: which requests share which per-second quota. */
const GROUP_OF_ACTION: Readonly<Record<string, QuotaGroup>> = {
  PutSecretValue: 'write',
  UpdateSecret: 'write',
  UpdateSecretVersionStage: 'write',
  RemoveRegionsFromReplication: 'write',
  ReplicateSecretToRegions: 'write',
  StopReplicationToReplica: 'write',
  TagResource: 'tag',
  UntagResource: 'tag',
  GetSecretValue: 'read',
  DescribeSecret: 'read',
  CreateSecret: 'create',
};

/** Per second, per account and region. */
export const AWS_QUOTAS: Readonly<Record<Exclude<QuotaGroup, 'other'>, number>> = {
  write: 50,
  tag: 50,
  read: 10_000,
  create: 50,
};

export function quotaGroupOf(action: string): QuotaGroup {
  return GROUP_OF_ACTION[action] ?? 'other';
}

export interface AwsQuotaProxyOptions {
  /** moto's URL. */
  upstream: string;
  /** Rates per group (per second); the documented ones by default. */
  rates?: Partial<Record<Exclude<QuotaGroup, 'other'>, number>>;
  /** Seconds of its rate each bucket holds; default 1. */
  burstSeconds?: number;
  /** Hears every request as it arrives, throttled or not: its action and its JSON body. */
  onRequest?: (action: string, body: Buffer) => void;
  /** Versions a secret may hold that AWS will not remove (created in the last 24 h, or labelled); default 100. */
  versionsPerSecret?: number;
  /**
   * Counts those versions of a secret as moto holds them (the test's own reading); without it the
   * proxy counts the PutSecretValue requests it forwarded for the secret in the last 24 hours.
   */
  countVersions?: (secretId: string) => Promise<number>;
}

export interface AwsQuotaProxy {
  /** `http://127.0.0.1:<port>`: the endpoint to give keyroll. */
  url: string;
  /** Requests forwarded to moto, by action. */
  forwarded(): Record<string, number>;
  /** Requests forwarded to moto, by quota group. */
  forwardedByGroup(): Record<QuotaGroup, number>;
  /** Requests answered ThrottlingException, by quota group. */
  throttledByGroup(): Record<QuotaGroup, number>;
  /** PutSecretValue requests answered LimitExceededException (the secret's version quota). */
  refusedForVersions(): number;
  /** Refuses the next `count` calls of each of `groups` (a fault case), whatever the buckets hold. */
  refuseNext(groups: readonly QuotaGroup[], count: number): void;
  /** Forgets the counts (the buckets keep their tokens). */
  resetCounts(): void;
  close(): Promise<void>;
}

interface Bucket {
  ratePerMs: number;
  capacity: number;
  tokens: number;
  refilledAt: number;
}

const THROTTLE_BODY = JSON.stringify({ __type: 'ThrottlingException', message: 'Rate exceeded' });
const VERSION_QUOTA_BODY = JSON.stringify({
  __type: 'LimitExceededException',
  message: 'You have exceeded the maximum number of versions for this secret.',
});
const DAY_MS = 24 * 3600_000;

/** The secret a request names (SecretId), or '' when its body is not JSON. */
function secretIdOf(body: Buffer): string {
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { SecretId?: unknown };
    return typeof parsed.SecretId === 'string' ? parsed.SecretId : '';
  } catch {
    return '';
  }
}

function zero(): Record<QuotaGroup, number> {
  return { write: 0, tag: 0, read: 0, create: 0, other: 0 };
}

export async function startAwsQuotaProxy(options: AwsQuotaProxyOptions): Promise<AwsQuotaProxy> {
  const agent = new Agent({ connections: 128, pipelining: 1 });
  const burstSeconds = options.burstSeconds ?? 1;
  const now = (): number => performance.now();
  const buckets = new Map<QuotaGroup, Bucket>();
  for (const group of ['write', 'tag', 'read', 'create'] as const) {
    const rate = options.rates?.[group] ?? AWS_QUOTAS[group];
    buckets.set(group, {
      ratePerMs: rate / 1000,
      capacity: rate * burstSeconds,
      tokens: rate * burstSeconds,
      refilledAt: now(),
    });
  }
  let forwarded: Record<string, number> = {};
  let forwardedByGroup = zero();
  let throttled = zero();
  const refusals = zero();
  const versionsPerSecret = options.versionsPerSecret ?? 100;
  /** When each forwarded PutSecretValue was answered, per secret (the count without `countVersions`). */
  const puts = new Map<string, number[]>();
  let refusedForVersions = 0;
  const countVersions =
    options.countVersions ??
    ((secretId: string): Promise<number> => {
      const since = Date.now() - DAY_MS;
      return Promise.resolve((puts.get(secretId) ?? []).filter((at) => at > since).length);
    });

  const admit = (group: QuotaGroup): boolean => {
    if (refusals[group] > 0) {
      refusals[group]--;
      return false;
    }
    const bucket = buckets.get(group);
    if (bucket === undefined) return true;
    const at = now();
    bucket.tokens = Math.min(bucket.capacity, bucket.tokens + (at - bucket.refilledAt) * bucket.ratePerMs);
    bucket.refilledAt = at;
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  };

  const refuse = (res: ServerResponse, errorType: string, body: string): void => {
    res.writeHead(400, {
      'content-type': 'application/x-amz-json-1.1',
      'x-amzn-requestid': randomUUID(),
      'x-amzn-errortype': errorType,
      'content-length': String(Buffer.byteLength(body)),
    });
    res.end(body);
  };

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void answer(req, res, Buffer.concat(chunks)).catch(() => {
        res.destroy();
      });
    });
  });

  const answer = async (req: IncomingMessage, res: ServerResponse, body: Buffer): Promise<void> => {
    const action = String(req.headers['x-amz-target'] ?? '').replace(/^secretsmanager\./, '');
    const group = quotaGroupOf(action);
    options.onRequest?.(action, body);
    if (!admit(group)) {
      throttled[group]++;
      refuse(
        res,
        'ThrottlingException:http://internal.amazon.com/coral/com.amazon.coral.availability/',
        THROTTLE_BODY,
      );
      return;
    }
    const secretId = action === 'PutSecretValue' ? secretIdOf(body) : '';
    if (secretId !== '' && (await countVersions(secretId)) >= versionsPerSecret) {
      refusedForVersions++;
      refuse(res, 'LimitExceededException', VERSION_QUOTA_BODY);
      return;
    }
    forwarded[action] = (forwarded[action] ?? 0) + 1;
    forwardedByGroup[group]++;
    const headers = { ...req.headers };
    delete headers.connection;
    delete headers['transfer-encoding'];
    const upstream = await request(new URL(req.url ?? '/', options.upstream), {
      method: 'POST',
      headers,
      body,
      dispatcher: agent,
    });
    const out: Record<string, string | string[]> = {};
    for (const [name, value] of Object.entries(upstream.headers)) {
      if (value !== undefined && !['connection', 'transfer-encoding', 'keep-alive'].includes(name))
        out[name] = value;
    }
    const answered = Buffer.from(await upstream.body.arrayBuffer());
    if (secretId !== '' && upstream.statusCode === 200)
      puts.set(secretId, [...(puts.get(secretId) ?? []), Date.now()]);
    res.writeHead(upstream.statusCode, out);
    res.end(answered);
  };
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    forwarded: () => ({ ...forwarded }),
    forwardedByGroup: () => ({ ...forwardedByGroup }),
    throttledByGroup: () => ({ ...throttled }),
    refusedForVersions: () => refusedForVersions,
    refuseNext: (groups, count) => {
      for (const group of groups) refusals[group] = count;
    },
    resetCounts: () => {
      forwarded = {};
      forwardedByGroup = zero();
      throttled = zero();
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
      await agent.close();
    },
  };
}
