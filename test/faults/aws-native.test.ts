// The fault suite for AWS-native rotation (scheduler: aws-native, src/lambda/), with its usual
// verdict: after the faulted rotation and the next one, some copy of the key works (0 lost), no
// minted secret is in any audit line or alert (0 leaked), and a failure keyroll saw was alerted.
// The events are the ones Secrets Manager sends, against moto (test/support/aws-native-bench.ts).
import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.ts';
import { motoServer } from '../integration/servers.ts';
import { ENTRY, SLOT_A, SLOT_B, lossyProxy, pendingVersions, startNativeBench, type NativeBench } from '../support/aws-native-bench.ts';
import { findSecrets } from '../support/secret-scan.ts';
import { checkNotLost, recordCase } from './record.ts';

let emulator: RunningEmulator;
let bench: NativeBench | undefined;

beforeAll(async () => {
  emulator = await startEmulator({ port: 0 });
});
afterAll(async () => {
  await emulator.close();
});
afterEach(() => {
  bench?.close();
  bench = undefined;
});

const anySlotLive = (_: string, secret: string): boolean => [SLOT_A, SLOT_B].some((slot) => emulator.state.isLiveSecret(slot, secret));

async function verdict(b: NativeBench): Promise<{ lost: number; leaked: number; hits: unknown[] }> {
  const lost = checkNotLost([{ keyId: ENTRY, secrets: [(await b.value('AWSCURRENT'))?.apiKey, (await b.value('AWSPREVIOUS'))?.apiKey] }], anySlotLive);
  const leaks = findSecrets([...b.lines, JSON.stringify(b.alerter.alerts)], emulator.state.mintedSecrets());
  return { lost: lost.lost, leaked: leaks.leaked, hits: leaks.hits };
}

describe('fault matrix: AWS-native rotation', () => {
  it('store × the AWSPENDING put never lands: the step fails alerted, no AWSPENDING blocks the next rotation, which succeeds', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = (bench = await startNativeBench(server, emulator));
    const proxy = await lossyProxy(server.endpoint, 'put');
    let failed = 0;
    try {
      await b.step('createSecret', randomUUID(), { endpoint: proxy.url });
    } catch {
      failed = 1;
    } finally {
      await proxy.close();
    }
    const blocked = pendingVersions(await b.stages()).length;
    expect(await b.rotate(randomUUID())).toEqual(['rolled', 'nothing-to-do', 'tested', 'finished']);
    const { lost, leaked, hits } = await verdict(b);
    const alerted = b.alerter.alerts.some(({ alert }) => alert.keyId === ENTRY && alert.step === 'store') ? 1 : 0;
    recordCase(ctx, { case: 'store × AWSPENDING put never lands (aws-native)', fault: 'backend down', backend: 'aws', step: 'store', result: 'failed', lost, leaked, alerted, failures: failed });
    expect(failed).toBe(1);
    expect(blocked).toBe(0);
    expect(lost).toBe(0);
    expect(hits).toEqual([]);
    expect(alerted).toBe(1);
  });

  it('finish × the function times out between createSecret and finishSecret: the next rotation takes the lock over, repairs and finishes', async (ctx) => {
    const server = motoServer();
    if (!server) return ctx.skip();
    const b = (bench = await startNativeBench(server, emulator));
    await b.step('createSecret', randomUUID());
    // AWS gave up on that rotation; the next one comes after the lock's TTL.
    const later = { nowOffsetMs: 10 * 60_000 };
    const token = randomUUID();
    for (const step of ['createSecret', 'setSecret', 'testSecret', 'finishSecret']) await b.step(step, token, later);
    const { lost, leaked, hits } = await verdict(b);
    // The stalled rotation is reported when the next one takes it over.
    const alerted = b.alerter.alerts.some(({ alert }) => alert.errorCode === 'KR_RECOVERED_INTENT') ? 1 : 0;
    recordCase(ctx, { case: 'finish × function timed out between steps (aws-native)', fault: 'process killed', backend: 'aws', step: 'finish', result: 'recovered', lost, leaked, alerted, failures: 1 });
    expect(pendingVersions(await b.stages())).toEqual([]);
    expect((await b.value('AWSCURRENT'))?.keyId).toBe(SLOT_B);
    expect(lost).toBe(0);
    expect(hits).toEqual([]);
    expect(alerted).toBe(1);
  });
});
