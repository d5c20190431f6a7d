// keyroll as the rotation function of a two-slot secret (scheduler: aws-native; src/lambda/),
// driven with the events Secrets Manager sends (Step, SecretId = the ARN, ClientRequestToken)
// against moto and the emulator. moto's own RotateSecret would call a Lambda function it cannot
// run here, so the tests invoke the handler as Secrets Manager does: each step in order, each
// repeated (AWS retries), a pause between steps longer than the lock, a lost put. enable-rotation
// is checked against moto's RotateSecret with a function moto knows.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CreateSecretCommand, DescribeSecretCommand, GetSecretValueCommand } from '@aws-sdk/client-secrets-manager';
import { request } from 'undici';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import { AwsBackendConfig } from '../../src/backends/aws/config.ts';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.ts';
import { runRotationStep } from '../../src/lambda/handler.ts';
import type { Policy } from '../../src/policy/schema.ts';
import { RecordingAlerter, JSON_SHAPE, keyPolicy } from '../rotation/harness.ts';
import { motoEnv, run, sdkClient } from './aws-fixtures.ts';
import { motoServer, type MotoServer } from './servers.ts';

const ENTRY = 'billing-api';
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';

let emulator: RunningEmulator;
let lines: string[];
let alerter: RecordingAlerter;
let counter = 0;

beforeAll(async () => {
  emulator = await startEmulator({ port: 0 });
});
afterAll(async () => {
  await emulator.close();
});
beforeEach(() => {
  lines = [];
  alerter = new RecordingAlerter();
});

interface Bench {
  server: MotoServer;
  name: string;
  arn: string;
  policy: Policy;
  step(step: string, token: string, options?: { nowOffsetMs?: number; endpoint?: string }): Promise<string>;
  stages(): Promise<Record<string, string[]>>;
  value(stage: string): Promise<{ apiKey: string; keyId: string } | undefined>;
}

function org(): string {
  return emulator.state.apiKey(SLOT_A).organizationId;
}

async function bench(server: MotoServer, overrides: { lockTtlMs?: number } = {}): Promise<Bench> {
  counter += 1;
  const name = `keyroll-test/${run}/native-${String(counter)}`;
  const client = sdkClient(server);
  // The active slot's live value, as a first rotation by keyroll run would have left it.
  const created = await client.send(new CreateSecretCommand({ Name: name, SecretString: JSON.stringify({ apiKey: emulator.state.currentSecret(SLOT_A), keyId: SLOT_A }) }));
  const arn = created.ARN ?? name;
  const policyFor = (endpoint: string): Policy => ({
    file: 'native.yaml',
    api: { baseUrl: emulator.url, credential: { type: 'bearer', token: 'env:UNUSED' }, methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' }, timeouts: { headersMs: 5000, bodyMs: 5000 }, rateLimitPerMinute: 6000 },
    backends: { aws: AwsBackendConfig.parse({ kind: 'aws', endpoint, region: server.region }) },
    alerts: { sinks: {} },
    keys: [
      keyPolicy(ENTRY, org(), {
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
  return {
    server,
    name,
    arn,
    policy,
    step: async (step, token, options = {}) => {
      const audit = createAuditLog({ destination: { write: (line: string) => void lines.push(line) } });
      const offset = options.nowOffsetMs ?? 0;
      const result = await runRotationStep(
        { Step: step, SecretId: arn, ClientRequestToken: token },
        {
          policy: options.endpoint ? policyFor(options.endpoint) : policy,
          audit,
          env: { ...process.env, ...motoEnv(server) },
          runtime: { alerter, credentials: staticCredential(new Secret('demo-owner-token')), now: () => new Date(Date.now() + offset) },
        },
      );
      return result.did;
    },
    stages: async () => {
      const described = await client.send(new DescribeSecretCommand({ SecretId: name }));
      return described.VersionIdsToStages ?? {};
    },
    value: async (stage) => {
      try {
        const answer = await client.send(new GetSecretValueCommand({ SecretId: name, VersionStage: stage }));
        return JSON.parse(answer.SecretString ?? '{}') as { apiKey: string; keyId: string };
      } catch {
        return undefined;
      }
    },
  };
}

const live = (keyId: string, value: { apiKey: string } | undefined): boolean => value !== undefined && emulator.state.isLiveSecret(keyId, value.apiKey);
const pendingVersions = (stages: Record<string, string[]>): string[] => Object.entries(stages).filter(([, s]) => s.includes('AWSPENDING')).map(([id]) => id);

function expectNoSecretInOutput(): void {
  const text = [...lines, JSON.stringify(alerter.alerts)].join('\n');
  for (const secret of emulator.state.mintedSecrets()) expect(text).not.toContain(secret);
}

async function rotate(b: Bench, token = randomUUID()): Promise<string[]> {
  const did: string[] = [];
  for (const step of ['createSecret', 'setSecret', 'testSecret', 'finishSecret']) did.push(await b.step(step, token));
  return did;
}

describe('aws-native rotation: the four steps', () => {
  it('rolls the standby into AWSPENDING, then AWSCURRENT is the new live value, AWSPREVIOUS the previous active (alive), no AWSPENDING left', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const before = await b.value('AWSCURRENT');
    const token = randomUUID();
    expect(await b.step('createSecret', token)).toBe('rolled');
    // Between the steps consumers still read the previous active value, and it works.
    expect((await b.stages())[token]).toEqual(['AWSPENDING']);
    expect(await b.value('AWSCURRENT')).toEqual(before);
    expect(await b.step('setSecret', token)).toBe('nothing-to-do');
    expect(await b.step('testSecret', token)).toBe('tested');
    expect(await b.step('finishSecret', token)).toBe('finished');

    const current = await b.value('AWSCURRENT');
    expect(current?.keyId).toBe(SLOT_B);
    expect(live(SLOT_B, current)).toBe(true);
    expect(await b.value('AWSPREVIOUS')).toEqual(before);
    expect(live(SLOT_A, before)).toBe(true);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expect(alerter.alerts).toEqual([]);

    // The next rotation rolls the other slot: the alternation goes on.
    await rotate(b);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_A);
    expect(live(SLOT_A, await b.value('AWSCURRENT'))).toBe(true);
    expect(live(SLOT_B, await b.value('AWSPREVIOUS'))).toBe(true);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expectNoSecretInOutput();
  });

  it('each step repeated (AWS retries) rolls once and ends as once', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const rollsBefore = emulator.state.apiKey(SLOT_B).rollCount;
    const token = randomUUID();
    expect(await b.step('createSecret', token)).toBe('rolled');
    expect(await b.step('createSecret', token)).toBe('found-pending');
    for (const step of ['setSecret', 'setSecret', 'testSecret', 'testSecret']) await b.step(step, token);
    expect(await b.step('finishSecret', token)).toBe('finished');
    expect(await b.step('finishSecret', token)).toBe('already-current');
    expect(await b.step('createSecret', token)).toBe('already-current');
    expect(await b.step('testSecret', token)).toBe('tested');
    expect(emulator.state.apiKey(SLOT_B).rollCount).toBe(rollsBefore + 1);
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expectNoSecretInOutput();
  });

  it('a finishSecret that comes after the lock ran out still finishes while nobody took the key over', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server, { lockTtlMs: 60_000 });
    const token = randomUUID();
    await b.step('createSecret', token);
    await b.step('testSecret', token, { nowOffsetMs: 5 * 60_000 });
    expect(await b.step('finishSecret', token, { nowOffsetMs: 10 * 60_000 })).toBe('finished');
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expect(pendingVersions(await b.stages())).toEqual([]);
  });

  it('a rotation abandoned between steps (timeout) is repaired by the next one, and its late finishSecret changes nothing', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server, { lockTtlMs: 60_000 });
    const before = await b.value('AWSCURRENT');
    const first = randomUUID();
    await b.step('createSecret', first);
    // AWS gave up on the first rotation; the next one starts after the lock ran out.
    const second = randomUUID();
    const later = { nowOffsetMs: 10 * 60_000 };
    expect(await b.step('createSecret', second, later)).toBe('rolled');
    await b.step('testSecret', second, later);
    expect(await b.step('finishSecret', second, later)).toBe('finished');
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expect(await b.value('AWSPREVIOUS')).toEqual(before);
    // The first rotation's finishSecret, arriving late, never makes its (rolled-over) value current.
    await expect(b.step('finishSecret', first, later)).rejects.toMatchObject({ code: 'KR_NATIVE_NO_PENDING' });
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expectNoSecretInOutput();
  });
});

/** A proxy in front of moto that loses the answers of the AWSPENDING PutSecretValue (`lose: 'answer'`) or every put itself (`lose: 'put'`). */
async function lossyProxy(upstream: string, lose: 'answer' | 'put'): Promise<{ url: string; close: () => Promise<void>; puts: () => number }> {
  let puts = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      // Only the put after the roll (AWSPENDING), not the preflight's probes.
      const isPut = String(req.headers['x-amz-target'] ?? '').endsWith('PutSecretValue') && body.includes('AWSPENDING');
      if (isPut) puts += 1;
      if (isPut && lose === 'put') {
        req.socket.destroy();
        return;
      }
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'content-length') headers[k] = v;
      void request(`${upstream}${req.url ?? '/'}`, { method: req.method as 'POST', headers, body }).then(async (answer) => {
        const text = Buffer.from(await answer.body.arrayBuffer());
        // The first put lands at moto; its answer never reaches keyroll.
        if (isPut && lose === 'answer' && puts === 1) {
          req.socket.destroy();
          return;
        }
        res.writeHead(answer.statusCode, Object.fromEntries(Object.entries(answer.headers).filter(([k]) => k !== 'content-length' && k !== 'transfer-encoding')) as Record<string, string>);
        res.end(text);
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${String(port)}`, close: () => new Promise((resolve) => { server.close(() => { resolve(); }); }), puts: () => puts };
}

describe('aws-native rotation: lost puts', () => {
  it('a put whose answer is lost is sent again with the same token: one version, one roll', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const proxy = await lossyProxy(server.endpoint, 'answer');
    try {
      const rolls = emulator.state.apiKey(SLOT_B).rollCount;
      const token = randomUUID();
      expect(await b.step('createSecret', token, { endpoint: proxy.url })).toBe('rolled');
      expect(proxy.puts()).toBeGreaterThanOrEqual(2);
      expect(emulator.state.apiKey(SLOT_B).rollCount).toBe(rolls + 1);
      await b.step('testSecret', token);
      expect(await b.step('finishSecret', token)).toBe('finished');
      expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
      expectNoSecretInOutput();
    } finally {
      await proxy.close();
    }
  });

  it('a put that never lands fails the step without AWSPENDING; the repeated createSecret does not roll again; the next rotation succeeds', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const before = await b.value('AWSCURRENT');
    const proxy = await lossyProxy(server.endpoint, 'put');
    const token = randomUUID();
    const rolls = emulator.state.apiKey(SLOT_B).rollCount;
    try {
      await expect(b.step('createSecret', token, { endpoint: proxy.url })).rejects.toThrow();
    } finally {
      await proxy.close();
    }
    expect(emulator.state.apiKey(SLOT_B).rollCount).toBe(rolls + 1);
    expect(pendingVersions(await b.stages())).toEqual([]);
    // Consumers never noticed: AWSCURRENT is the working active slot.
    expect(await b.value('AWSCURRENT')).toEqual(before);
    expect(live(SLOT_A, before)).toBe(true);
    await expect(b.step('createSecret', token)).rejects.toMatchObject({ code: 'KR_NATIVE_VALUE_LOST' });
    expect(emulator.state.apiKey(SLOT_B).rollCount).toBe(rolls + 1);
    expect(alerter.alerts.map((a) => a.alert.errorCode)).toContain('KR_NATIVE_VALUE_LOST');
    await rotate(b);
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expectNoSecretInOutput();
  });
});

describe('aws-native rotation: which entries', () => {
  it('a secret no aws-native entry names is refused before anything is touched', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const other = { ...b.policy, keys: b.policy.keys.map((k) => ({ ...k, scheduler: undefined })) } as unknown as Policy;
    await expect(runRotationStep({ Step: 'createSecret', SecretId: b.arn, ClientRequestToken: randomUUID() }, { policy: other, audit: createAuditLog({ destination: { write: () => undefined } }) })).rejects.toMatchObject({ code: 'KR_NATIVE_NOT_CONFIGURED' });
  });
});
