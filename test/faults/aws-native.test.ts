// The fault suite for AWS-native rotation (scheduler: aws-native, src/lambda/), with its usual
// verdict: after the faulted steps and the next rotation, AWSCURRENT is the key's live value, or
// the failure was alerted critical with what to run (0 lost); no minted secret is in any audit line
// or alert (0 leaked); every failure keyroll saw has exactly one alert, a success none (alerted);
// and the API applied exactly the rolls the case expects (no double roll).
// The events are the ones Secrets Manager sends, against moto (test/support/aws-native-bench.ts).
import { randomUUID } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, type TestContext } from 'vitest';
import { useEmulator } from '../support/emulator.ts';
import { OWNER_TOKEN, spawnCli, type CliResult } from '../cli/harness.ts';
import { motoEnv } from '../integration/aws-fixtures.ts';
import { motoServer, type MotoServer } from '../integration/servers.ts';
import {
  ENTRY,
  SLOT_A,
  SLOT_B,
  lossyProxy,
  pendingVersions,
  startNativeBench,
  type NativeBench,
} from '../support/aws-native-bench.ts';
import { findSecrets } from '../support/secret-scan.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { waitFor } from '../support/wait-for.ts';
import { recordCase, type FaultCase } from './record.ts';

/** The rotation function in a process of its own (b-native-step.ts), for the crash case. */
const FUNCTION_ENTRY = fileURLToPath(new URL('./b-native-step.ts', import.meta.url));

const dir = useTempDir('keyroll-faults-native-');
const emulator = useEmulator();
let bench: NativeBench | undefined;

afterEach(() => {
  bench?.close();
  bench = undefined;
});

const FOUR_STEPS = ['createSecret', 'setSecret', 'testSecret', 'finishSecret'] as const;
const ROTATED = ['rolled', 'nothing-to-do', 'tested', 'finished'];
/** AWS gave up on a rotation; the next one comes after the lock's TTL (60 s on the bench). */
const LATER = { nowOffsetMs: 10 * 60_000 };

const rollsOf = (): number => emulator.state.rollCount(SLOT_A) + emulator.state.rollCount(SLOT_B);

interface NativeVerdict {
  lost: number;
  leaked: number;
  alerted: number;
  failures: number;
  problems: string[];
}

/**
 * The four figures of one case, recorded on the test before anything is asserted.
 * `failures`: the error code each failure keyroll saw must have alerted, once (a success: none).
 * `rolls`: the rolls the API must have applied during the case (the emulator's count).
 */
async function judge(
  ctx: Pick<TestContext, 'task'>,
  b: NativeBench,
  about: Pick<FaultCase, 'case' | 'fault' | 'step' | 'result'>,
  expected: {
    failures: readonly string[];
    rolls: number;
    rollsBefore: number;
    otherOutput?: readonly string[];
  },
): Promise<NativeVerdict> {
  const problems: string[] = [];
  // Not lost: AWSCURRENT is the live value of its slot, or a critical alert says what to run (every alert has a nextAction).
  const current = await b.value('AWSCURRENT');
  const currentWorks = current !== undefined && emulator.state.isLiveSecret(current.keyId, current.apiKey);
  const criticalWithAction = b.alerter.alerts.some(
    ({ alert }) => alert.keyId === ENTRY && alert.severity === 'critical',
  );
  const lost = currentWorks || criticalWithAction ? 0 : 1;
  if (lost) problems.push(`AWSCURRENT of ${b.name} does not work and no critical alert says what to run`);
  // A rotation that cannot finish leaves no AWSPENDING to block the next one.
  const pending = pendingVersions(await b.stages());
  if (pending.length > 0 && !criticalWithAction) problems.push(`AWSPENDING left on ${pending.join(', ')}`);
  // Not leaked: every minted secret, in every spelling, in every audit line and alert.
  const leaks = findSecrets(
    [...b.lines, JSON.stringify(b.alerter.alerts), ...(expected.otherOutput ?? [])],
    emulator.state.mintedSecrets(),
  );
  for (const hit of leaks.hits) problems.push(`secret ${hit.fingerprint} leaked (${hit.form})`);
  // Alerted: one alert per failure, none otherwise.
  const mine = b.alerter.alerts.filter(({ alert }) => alert.keyId === ENTRY).map(({ alert }) => alert);
  const alerted = expected.failures.filter(
    (code) => mine.filter((alert) => alert.errorCode === code).length === 1,
  ).length;
  // As judge.ts: the warning that a leftover marker was repaired is news about an earlier failure.
  const unexpected = mine
    .filter((alert) => !expected.failures.includes(alert.errorCode) && alert.step !== 'recovery')
    .map((alert) => alert.errorCode);
  if (unexpected.length > 0) problems.push(`alerts no failure explains: ${unexpected.join(', ')}`);
  // No double roll.
  const rolls = rollsOf() - expected.rollsBefore;
  if (rolls !== expected.rolls)
    problems.push(`the API applied ${String(rolls)} roll(s), the case expects ${String(expected.rolls)}`);
  recordCase(ctx, {
    ...about,
    backend: 'aws',
    lost,
    leaked: leaks.leaked,
    alerted,
    failures: expected.failures.length,
  });
  return { lost, leaked: leaks.leaked, alerted, failures: expected.failures.length, problems };
}

function assertVerdict(verdict: NativeVerdict): void {
  expect(verdict.problems, 'invariant problems').toEqual([]);
  expect(verdict.lost, 'lost').toBe(0);
  expect(verdict.leaked, 'leaked').toBe(0);
  expect(verdict.alerted, 'alerted').toBe(verdict.failures);
}

/** A fresh two-slot secret in moto, with the API's roll count and AWSCURRENT before the case. */
async function openCase(ctx: TestContext): Promise<{
  server: MotoServer;
  b: NativeBench;
  rollsBefore: number;
  before: Awaited<ReturnType<NativeBench['value']>>;
}> {
  const server = motoServer();
  if (!server) return ctx.skip();
  const b = (bench = await startNativeBench(server, emulator));
  return { server, b, rollsBefore: rollsOf(), before: await b.value('AWSCURRENT') };
}

async function refused(promise: Promise<string>): Promise<string> {
  try {
    return `did ${await promise}`;
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

describe('fault matrix: AWS-native rotation', () => {
  it('control × the four steps in order: the standby is AWSCURRENT and live, the previous active AWSPREVIOUS and alive, no alert', async (ctx) => {
    const { b, rollsBefore, before } = await openCase(ctx);
    const did = await b.rotate(randomUUID());
    const verdict = await judge(
      ctx,
      b,
      { case: 'control × four steps in order (aws-native)', fault: 'none', step: 'run', result: 'rotated' },
      { failures: [], rolls: 1, rollsBefore },
    );
    expect(did).toEqual(ROTATED);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    expect(await b.value('AWSPREVIOUS')).toEqual(before);
    expect(before !== undefined && emulator.state.isLiveSecret(SLOT_A, before.apiKey)).toBe(true);
    assertVerdict(verdict);
  });

  it('every step × repeated (AWS retries each step): one roll, one version, ends as one rotation, no alert', async (ctx) => {
    const { b, rollsBefore } = await openCase(ctx);
    const valuesBefore = (await b.keyVersions()).length;
    const token = randomUUID();
    const did: string[] = [];
    for (const step of FOUR_STEPS) for (let time = 0; time < 2; time++) did.push(await b.step(step, token));
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'every step × repeated (aws-native)',
        fault: 'AWS retries each step',
        step: 'run',
        result: 'rotated',
      },
      { failures: [], rolls: 1, rollsBefore },
    );
    expect(did).toEqual([
      'rolled',
      'found-pending',
      'nothing-to-do',
      'nothing-to-do',
      'tested',
      'tested',
      'finished',
      'already-current',
    ]);
    expect(await b.keyVersions(), 'one new version with a value').toHaveLength(valuesBefore + 1);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    assertVerdict(verdict);
  });

  // A step refused before anything was touched (no roll, no label moved) is not a failed rotation:
  // Secrets Manager records the failed step and retries; keyroll audits it (key.failed), no alert.
  it('order × testSecret and finishSecret before createSecret: refused, nothing touched; the rotation then runs', async (ctx) => {
    const { b, rollsBefore, before } = await openCase(ctx);
    const token = randomUUID();
    const early = [await refused(b.step('testSecret', token)), await refused(b.step('finishSecret', token))];
    const untouched = {
      current: await b.value('AWSCURRENT'),
      pending: pendingVersions(await b.stages()),
      rolls: rollsOf() - rollsBefore,
    };
    const did = await b.rotate(token);
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'order × test/finish before createSecret (aws-native)',
        fault: 'events out of order',
        step: 'run',
        result: 'rotated',
      },
      { failures: [], rolls: 1, rollsBefore },
    );
    expect(early).toEqual(['KR_NATIVE_NO_PENDING', 'KR_NATIVE_NO_PENDING']);
    expect(untouched).toEqual({ current: before, pending: [], rolls: 0 });
    expect(b.lines.filter((line) => line.includes('"event":"key.failed"'))).toHaveLength(2);
    expect(did).toEqual(ROTATED);
    assertVerdict(verdict);
  });

  it('order × finishSecret without testSecret: finishes under the lock, a late testSecret still passes', async (ctx) => {
    const { b, rollsBefore } = await openCase(ctx);
    const token = randomUUID();
    const did = [
      await b.step('createSecret', token),
      await b.step('finishSecret', token),
      await b.step('testSecret', token),
    ];
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'order × finishSecret without testSecret (aws-native)',
        fault: 'events out of order',
        step: 'finish',
        result: 'rotated',
      },
      { failures: [], rolls: 1, rollsBefore },
    );
    expect(did).toEqual(['rolled', 'finished', 'tested']);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    expect(pendingVersions(await b.stages())).toEqual([]);
    assertVerdict(verdict);
  });

  it('store × the AWSPENDING put lands and its answer is lost: sent again with the same token, one version, one roll', async (ctx) => {
    const { server, b, rollsBefore } = await openCase(ctx);
    const valuesBefore = (await b.keyVersions()).length;
    const proxy = await lossyProxy(server.endpoint, 'answer');
    const token = randomUUID();
    let created: string;
    try {
      created = await b.step('createSecret', token, { endpoint: proxy.url });
    } finally {
      await proxy.close();
    }
    const valuesAfterPut = (await b.keyVersions()).length;
    const rest = [
      await b.step('setSecret', token),
      await b.step('testSecret', token),
      await b.step('finishSecret', token),
    ];
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'store × AWSPENDING put answer lost (aws-native)',
        fault: 'backend answer lost after applying',
        step: 'store',
        result: 'rotated',
      },
      { failures: [], rolls: 1, rollsBefore },
    );
    expect(proxy.puts(), 'the put was sent again').toBeGreaterThanOrEqual(2);
    expect(created).toBe('rolled');
    expect(valuesAfterPut, 'one new version with a value').toBe(valuesBefore + 1);
    expect(rest).toEqual(['nothing-to-do', 'tested', 'finished']);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    assertVerdict(verdict);
  });

  it('store × the AWSPENDING put never lands: the step fails alerted, no AWSPENDING blocks the next rotation, which succeeds', async (ctx) => {
    const { server, b, rollsBefore } = await openCase(ctx);
    const proxy = await lossyProxy(server.endpoint, 'put');
    let failed: string;
    try {
      failed = await refused(b.step('createSecret', randomUUID(), { endpoint: proxy.url }));
    } finally {
      await proxy.close();
    }
    const blocked = pendingVersions(await b.stages());
    const next = await b.rotate(randomUUID());
    // The code of the failed put (a reset connection: a timeout or a network error) is the store alert's.
    const storeAlert =
      b.alerter.alerts.find(({ alert }) => alert.step === 'store')?.alert.errorCode ?? 'no store alert';
    // Two rolls: the failed rotation's (its value is nowhere, only the standby), then the next rotation's.
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'store × AWSPENDING put never lands (aws-native)',
        fault: 'backend down',
        step: 'store',
        result: 'failed',
      },
      { failures: [storeAlert], rolls: 2, rollsBefore },
    );
    expect(failed).not.toMatch(/^did /);
    expect(blocked).toEqual([]);
    expect(next).toEqual(ROTATED);
    assertVerdict(verdict);
  });

  it('verify × the API refuses the new value at testSecret: given up alerted, AWSPENDING removed, AWSCURRENT untouched; the next rotation succeeds', async (ctx) => {
    const { b, rollsBefore, before } = await openCase(ctx);
    const token = randomUUID();
    await b.step('createSecret', token);
    // Someone rolls the standby in the dashboard between the steps: the pending value dies.
    emulator.state.rollKey(SLOT_B);
    const tested = await refused(b.step('testSecret', token));
    const afterRefusal = { current: await b.value('AWSCURRENT'), pending: pendingVersions(await b.stages()) };
    const lateFinish = await refused(b.step('finishSecret', token));
    const next = await b.rotate(randomUUID());
    // Three rolls: keyroll's, the dashboard's, the next rotation's.
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'verify × new value refused at testSecret (aws-native)',
        fault: 'API refuses the new value',
        step: 'verify',
        result: 'failed',
      },
      { failures: ['KR_NATIVE_PENDING_REJECTED'], rolls: 3, rollsBefore },
    );
    expect(tested).toBe('KR_NATIVE_PENDING_REJECTED');
    expect(afterRefusal).toEqual({ current: before, pending: [] });
    expect(
      b.alerter.alerts.find(({ alert }) => alert.errorCode === 'KR_NATIVE_PENDING_REJECTED')?.alert.severity,
    ).toBe('error');
    expect(lateFinish).toBe('KR_NATIVE_NO_PENDING');
    expect(next).toEqual(ROTATED);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    assertVerdict(verdict);
  });

  it('finish × the function times out between createSecret and finishSecret: the next rotation takes the lock over, repairs and finishes', async (ctx) => {
    const { b, rollsBefore } = await openCase(ctx);
    await b.step('createSecret', randomUUID());
    const token = randomUUID();
    const did: string[] = [];
    for (const step of FOUR_STEPS) did.push(await b.step(step, token, LATER));
    // The stalled rotation is reported (a warning) when the next one takes it over.
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'finish × function timed out between steps (aws-native)',
        fault: 'process killed',
        step: 'finish',
        result: 'recovered',
      },
      { failures: ['KR_RECOVERED_INTENT'], rolls: 2, rollsBefore },
    );
    expect(did).toEqual(ROTATED);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    assertVerdict(verdict);
  });

  it('roll × the function is killed after the roll, before the put (SIGKILL): the retried createSecret does not roll again and alerts; the next rotation repairs and finishes', async (ctx) => {
    const { server, b, rollsBefore, before } = await openCase(ctx);
    const token = randomUUID();
    // The bench's entry, as the deployed function reads it: the same secret, slots and lock TTL.
    const policyFile = join(dir.path(), 'policy.json');
    await writeFile(policyFile, JSON.stringify(functionPolicy(b, server.endpoint, server.region)));
    // The API applies the roll and holds its answer: the function dies between the roll and the put.
    emulator.faults.inject('roll', { kind: 'failAfterApply', then: 'hang' }, 1);
    const child = spawnCli(
      [JSON.stringify({ Step: 'createSecret', SecretId: b.arn, ClientRequestToken: token })],
      dir.path(),
      {
        entry: FUNCTION_ENTRY,
        env: { ...stringEnv(motoEnv(server)), KEYROLL_POLICY: policyFile, KEYROLL_API_TOKEN: OWNER_TOKEN },
      },
    );
    let killed: CliResult;
    try {
      let exited: CliResult | undefined;
      void child.result.then((result) => (exited = result));
      await waitFor(
        () => {
          if (exited)
            throw new Error(
              `the function exited before its roll was applied: ${exited.stderr}${exited.lastLine}`,
            );
          return rollsOf() > rollsBefore;
        },
        "the function's roll applied",
        { intervalMs: 5, timeoutMs: 20_000 },
      );
      child.child.kill('SIGKILL');
      killed = await child.result;
    } finally {
      if (child.child.exitCode === null && child.child.signalCode === null) child.child.kill('SIGKILL');
      emulator.faults.clear();
    }
    const atKill = { current: await b.value('AWSCURRENT'), pending: pendingVersions(await b.stages()) };
    // Lambda timed out: Secrets Manager retries createSecret with the same token.
    const retried = await refused(b.step('createSecret', token));
    const afterRetry = pendingVersions(await b.stages());
    const next: string[] = [];
    const nextToken = randomUUID();
    for (const step of FOUR_STEPS) next.push(await b.step(step, nextToken, LATER));
    // The dead function could not alert: its failure's one alert is the retried step's.
    const verdict = await judge(
      ctx,
      b,
      {
        case: 'roll × function killed after the roll, before the put (aws-native)',
        fault: 'SIGKILL',
        step: 'roll',
        result: 'aborted',
      },
      {
        failures: ['KR_NATIVE_VALUE_LOST'],
        rolls: 2,
        rollsBefore,
        otherOutput: [killed.stdout, killed.stderr],
      },
    );
    expect(child.child.signalCode, 'the function died of the kill, mid-step').toBe('SIGKILL');
    expect(atKill).toEqual({ current: before, pending: [] });
    expect(retried).toBe('KR_NATIVE_VALUE_LOST');
    expect(
      b.alerter.alerts.find(({ alert }) => alert.errorCode === 'KR_NATIVE_VALUE_LOST')?.alert.severity,
    ).toBe('error');
    expect(afterRetry).toEqual([]);
    expect(next).toEqual(ROTATED);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    assertVerdict(verdict);
  });
});

/** The bench's policy as the policy file a deployed function reads (KEYROLL_POLICY). */
function functionPolicy(b: NativeBench, endpoint: string, region: string): unknown {
  const key = b.policy.keys[0];
  return {
    version: 1,
    // Far longer than the hold: the kill, not a timeout, ends the step.
    api: {
      baseUrl: emulator.url,
      credential: { type: 'bearer', token: 'env:KEYROLL_API_TOKEN' },
      timeouts: { headersMs: 30_000, bodyMs: 30_000 },
      rateLimitPerMinute: 6000,
    },
    backends: { aws: { kind: 'aws', endpoint, region } },
    alerts: { sinks: {} },
    keys: [
      {
        id: ENTRY,
        organization: key?.organizationId,
        slots: [SLOT_A, SLOT_B],
        // The bench's zero, as near as a policy file may say it.
        consumerRefresh: '1ms',
        minInterval: '1ms',
        // Covers one roll attempt and the write (validate refuses less); the next rotation comes 10 min later.
        lockTtl: '5m',
        maxAge: '30d',
        scheduler: 'aws-native',
        destinations: [{ backend: 'aws', path: b.name, shape: key?.destinations[0]?.target.shape }],
      },
    ],
  };
}

function stringEnv(env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(
    Object.entries(env).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}
