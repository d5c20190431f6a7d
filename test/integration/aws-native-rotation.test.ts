// keyroll as the rotation function of a two-slot secret (scheduler: aws-native; src/lambda/),
// driven with the events Secrets Manager sends (Step, SecretId = the ARN, ClientRequestToken)
// against moto and the emulator. moto's own RotateSecret would call a Lambda function it cannot
// run here, so the tests invoke the handler as Secrets Manager does: each step in order, each
// repeated (AWS retries), a pause between steps longer than the lock, a lost put. enable-rotation
// is checked against moto's RotateSecret with a function moto knows.
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { useEmulator } from '../support/emulator.ts';
import { createAuditLog } from '../../src/audit/logger.ts';
import { runRotationStep } from '../../src/lambda/handler.ts';
import type { Policy } from '../../src/policy/schema.ts';
import {
  SLOT_A,
  SLOT_B,
  lossyProxy,
  pendingVersions,
  startNativeBench,
  type NativeBench,
} from '../support/aws-native-bench.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { motoServer, type MotoServer } from './servers.ts';

const emulator = useEmulator();
let current: NativeBench | undefined;

afterEach(() => {
  current?.close();
  current = undefined;
});

async function bench(server: MotoServer, overrides: { lockTtlMs?: number } = {}): Promise<NativeBench> {
  current = await startNativeBench(server, emulator, overrides);
  return current;
}

const live = (keyId: string, value: { apiKey: string } | undefined): boolean =>
  value !== undefined && emulator.state.isLiveSecret(keyId, value.apiKey);

function expectNoSecretInOutput(): void {
  expectNoSecrets(
    [...(current?.lines ?? []), JSON.stringify(current?.alerter.alerts ?? [])],
    emulator.state.mintedSecrets(),
    "the rotation function's audit lines and alerts",
  );
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
    expect(b.alerter.alerts).toEqual([]);

    // The next rotation rolls the other slot: the alternation goes on.
    await b.rotate(randomUUID());
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
    await expect(b.step('finishSecret', first, later)).rejects.toMatchObject({
      code: 'KR_NATIVE_NO_PENDING',
    });
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expectNoSecretInOutput();
  });
});

describe('aws-native rotation: events out of order', () => {
  it('testSecret and finishSecret before createSecret change nothing; setSecret does nothing; then the rotation runs', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const before = await b.value('AWSCURRENT');
    const token = randomUUID();
    await expect(b.step('finishSecret', token)).rejects.toMatchObject({ code: 'KR_NATIVE_NO_PENDING' });
    await expect(b.step('testSecret', token)).rejects.toMatchObject({ code: 'KR_NATIVE_NO_PENDING' });
    expect(await b.step('setSecret', token)).toBe('nothing-to-do');
    expect(await b.value('AWSCURRENT')).toEqual(before);
    expect(pendingVersions(await b.stages())).toEqual([]);
    expect(await b.rotate(token)).toEqual(['rolled', 'nothing-to-do', 'tested', 'finished']);
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expectNoSecretInOutput();
  });

  it('finishSecret right after createSecret (testSecret skipped) still finishes under the lock', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const token = randomUUID();
    await b.step('createSecret', token);
    expect(await b.step('finishSecret', token)).toBe('finished');
    expect(await b.step('testSecret', token)).toBe('tested');
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
  });
});

describe('aws-native rotation: a refused new value', () => {
  it('testSecret on a value the API refuses gives the rotation up: AWSPENDING removed, AWSCURRENT untouched, alerted; the next rotation succeeds', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = await bench(server);
    const before = await b.value('AWSCURRENT');
    const token = randomUUID();
    await b.step('createSecret', token);
    // Someone rolls the standby in the dashboard between the steps: the pending value dies.
    emulator.state.rollKey(SLOT_B);
    await expect(b.step('testSecret', token)).rejects.toMatchObject({ code: 'KR_NATIVE_PENDING_REJECTED' });
    expect(pendingVersions(await b.stages())).toEqual([]);
    expect(await b.value('AWSCURRENT')).toEqual(before);
    expect(
      b.alerter.alerts.find((a) => a.alert.errorCode === 'KR_NATIVE_PENDING_REJECTED')?.alert.severity,
    ).toBe('error');
    await expect(b.step('finishSecret', token)).rejects.toMatchObject({ code: 'KR_NATIVE_NO_PENDING' });
    expect(await b.value('AWSCURRENT')).toEqual(before);
    expect(await b.rotate(randomUUID())).toEqual(['rolled', 'nothing-to-do', 'tested', 'finished']);
    expect(live(SLOT_B, await b.value('AWSCURRENT'))).toBe(true);
    expectNoSecretInOutput();
  });
});

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
    expect(b.alerter.alerts.map((a) => a.alert.errorCode)).toContain('KR_NATIVE_VALUE_LOST');
    await b.rotate(randomUUID());
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
    const other = {
      ...b.policy,
      keys: b.policy.keys.map((k) => ({ ...k, scheduler: undefined })),
    } as unknown as Policy;
    await expect(
      runRotationStep(
        { Step: 'createSecret', SecretId: b.arn, ClientRequestToken: randomUUID() },
        { policy: other, audit: createAuditLog({ destination: { write: () => undefined } }) },
      ),
    ).rejects.toMatchObject({ code: 'KR_NATIVE_NOT_CONFIGURED' });
  });
});
