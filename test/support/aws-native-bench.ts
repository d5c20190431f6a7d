// A two-slot secret in moto rotated natively (scheduler: aws-native, src/lambda/): the policy, the
// rotation function invoked with the events Secrets Manager sends, and views of the secret's labels.
// moto cannot run a Lambda function here, so the tests send the events themselves. Shared by the
// integration tests and the fault suite.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  CreateSecretCommand,
  DescribeSecretCommand,
  GetSecretValueCommand,
} from '@aws-sdk/client-secrets-manager';
import { request } from 'undici';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import type { RunningEmulator } from '../../src/emulator/server.ts';
import { runRotationStep } from '../../src/lambda/handler.ts';
import type { Policy } from '../../src/policy/schema.ts';
import { JSON_SHAPE, RecordingAlerter, keyPolicy } from '../rotation/harness.ts';
import { motoEnv, run, sdkClient } from '../integration/aws-fixtures.ts';
import type { MotoServer } from '../integration/servers.ts';

export const ENTRY = 'billing-api';
export const SLOT_A = 'key_demo_billing_a';
export const SLOT_B = 'key_demo_billing_b';

let counter = 0;

export interface NativeBench {
  name: string;
  arn: string;
  policy: Policy;
  /** Every audit line the function wrote, and every alert it sent. */
  lines: string[];
  alerter: RecordingAlerter;
  /** One invocation of the function; `did` as the step audited it. */
  step(step: string, token: string, options?: { nowOffsetMs?: number; endpoint?: string }): Promise<string>;
  /** The four steps in order, with one token. */
  rotate(token: string): Promise<string[]>;
  stages(): Promise<Record<string, string[]>>;
  value(stage: string): Promise<{ apiKey: string; keyId: string } | undefined>;
  /** The versions that hold a key's value (not keyroll's lock versions on the secret). */
  keyVersions(): Promise<string[]>;
  close(): void;
}

/** A secret whose AWSCURRENT is the active slot's live value, as a first rotation by keyroll run would have left it. */
/**
 * `apiTokenSecretArn`: keyroll's credential is read from that secret as the deployed function reads
 * it (KEYROLL_API_TOKEN_SECRET_ARN, policy `env:KEYROLL_API_TOKEN`), and the environment holds no value.
 */
export async function startNativeBench(
  server: MotoServer,
  emulator: RunningEmulator,
  overrides: { lockTtlMs?: number; apiTokenSecretArn?: string } = {},
): Promise<NativeBench> {
  counter += 1;
  const name = `keyroll-test/${run}/native-${String(counter)}`;
  const client = sdkClient(server);
  const created = await client.send(
    new CreateSecretCommand({
      Name: name,
      SecretString: JSON.stringify({ apiKey: emulator.state.currentSecret(SLOT_A), keyId: SLOT_A }),
    }),
  );
  const arn = created.ARN ?? name;
  const lines: string[] = [];
  const alerter = new RecordingAlerter();
  const policyFor = (endpoint: string): Policy => ({
    file: 'native.yaml',
    api: {
      baseUrl: emulator.url,
      credential: {
        type: 'bearer',
        token: overrides.apiTokenSecretArn === undefined ? 'env:UNUSED' : 'env:KEYROLL_API_TOKEN',
      },
      methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' },
      timeouts: { headersMs: 5000, bodyMs: 5000 },
      rateLimitPerMinute: 6000,
    },
    backends: { aws: AwsBackendConfig.parse({ kind: 'aws', endpoint, region: server.region }) },
    alerts: { sinks: {} },
    keys: [
      keyPolicy(ENTRY, emulator.state.apiKey(SLOT_A).organizationId, {
        slots: [SLOT_A, SLOT_B],
        consumerRefreshMs: 0,
        minIntervalMs: 0,
        lockTtlMs: overrides.lockTtlMs ?? 60_000,
        scheduler: 'aws-native',
        destinations: [{ backend: 'aws', target: { path: name, shape: JSON_SHAPE } }],
      }),
    ],
  });
  const policy = policyFor(server.endpoint);
  const step: NativeBench['step'] = async (which, token, options = {}) => {
    const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
    const offset = options.nowOffsetMs ?? 0;
    const result = await runRotationStep(
      { Step: which, SecretId: arn, ClientRequestToken: token },
      {
        policy: options.endpoint ? policyFor(options.endpoint) : policy,
        audit,
        env:
          overrides.apiTokenSecretArn === undefined
            ? { ...process.env, ...motoEnv(server) }
            : {
                ...withoutApiToken(process.env),
                ...motoEnv(server),
                KEYROLL_API_TOKEN_SECRET_ARN: overrides.apiTokenSecretArn,
              },
        runtime: {
          alerter,
          ...(overrides.apiTokenSecretArn === undefined
            ? { credentials: staticCredential(new Secret('demo-owner-token')) }
            : {}),
          now: () => new Date(Date.now() + offset),
        },
      },
    );
    return result.did;
  };
  return {
    name,
    arn,
    policy,
    lines,
    alerter,
    step,
    rotate: async (token) => {
      const did: string[] = [];
      for (const which of ['createSecret', 'setSecret', 'testSecret', 'finishSecret'])
        did.push(await step(which, token));
      return did;
    },
    stages: async () =>
      (await client.send(new DescribeSecretCommand({ SecretId: name }))).VersionIdsToStages ?? {},
    value: async (stage) => {
      try {
        const answer = await client.send(new GetSecretValueCommand({ SecretId: name, VersionStage: stage }));
        return JSON.parse(answer.SecretString ?? '{}') as { apiKey: string; keyId: string };
      } catch {
        return undefined;
      }
    },
    keyVersions: async () => {
      const ids = Object.keys(
        (await client.send(new DescribeSecretCommand({ SecretId: name }))).VersionIdsToStages ?? {},
      );
      const withValue = await Promise.all(
        ids.map(async (id) => {
          const answer = await client.send(new GetSecretValueCommand({ SecretId: name, VersionId: id }));
          return typeof (JSON.parse(answer.SecretString ?? '{}') as { apiKey?: unknown }).apiKey === 'string'
            ? id
            : undefined;
        }),
      );
      return withValue.filter((id): id is string => id !== undefined);
    },
    close: () => {
      client.destroy();
    },
  };
}

function withoutApiToken(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const copy = { ...env };
  delete copy.KEYROLL_API_TOKEN;
  return copy;
}

/** The versions that carry AWSPENDING. */
export function pendingVersions(stages: Record<string, string[]>): string[] {
  return Object.entries(stages)
    .filter(([, labels]) => labels.includes('AWSPENDING'))
    .map(([id]) => id);
}

/** A proxy in front of moto that loses the answers of the AWSPENDING PutSecretValue (`lose: 'answer'`) or every put itself (`lose: 'put'`). */
export async function lossyProxy(
  upstream: string,
  lose: 'answer' | 'put',
): Promise<{ url: string; close: () => Promise<void>; puts: () => number }> {
  let puts = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      // Only the put after the roll (AWSPENDING), not the preflight's probes.
      const isPut =
        String(req.headers['x-amz-target'] ?? '').endsWith('PutSecretValue') && body.includes('AWSPENDING');
      if (isPut) puts += 1;
      if (isPut && lose === 'put') {
        req.socket.destroy();
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers))
        if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
      void request(`${upstream}${req.url ?? '/'}`, { method: req.method as 'POST', headers, body }).then(
        async (answer) => {
          const text = Buffer.from(await answer.body.arrayBuffer());
          // The first put lands at moto; its answer never reaches keyroll.
          if (isPut && lose === 'answer' && puts === 1) {
            req.socket.destroy();
            return;
          }
          res.writeHead(
            answer.statusCode,
            Object.fromEntries(
              Object.entries(answer.headers).filter(
                ([k]) => k !== 'content-length' && k !== 'transfer-encoding',
              ),
            ) as Record<string, string>,
          );
          res.end(text);
        },
      );
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}`,
    close: () =>
      new Promise((resolve) => {
        server.close(() => {
          resolve();
        });
      }),
    puts: () => puts,
  };
}
