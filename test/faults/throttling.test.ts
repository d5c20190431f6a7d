// Invariant 11 on moto behind AWS's request quotas (test/support/aws-quota-proxy.ts): a throttle
// answer is waited out, never a failure. The matrix arms the write group, the tag group and both at
// every step (the next calls of the group are refused with ThrottlingException, as AWS answers);
// every case must end rotated with nothing lost or leaked, and keyroll must have counted every
// refusal. Then an emergency over many keys in a busy account: other writers leave keyroll only a
// fifth of the write quota, and every key must still be rolled.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { staticCredential } from '../../src/api/credentials.ts';
import { createAlerter } from '../../src/alerts/alerter.ts';
import { createAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import { createRuntime, type Runtime } from '../../src/rotation/runtime.ts';
import { runRotations } from '../../src/rotation/run.ts';
import { startAwsQuotaProxy } from '../support/aws-quota-proxy.ts';
import { OWNER_TOKEN, startFaultBench, type CaseKey, type FaultBench } from './bench.ts';
import { THROTTLE_CASES, caseName, casesFor } from './cases.ts';
import { isUsable, judgeCase } from './judge.ts';
import { runQuotaOrderCase, runVersionQuotaCase } from './quota-orders.ts';
import { runInProcessCase } from './run-case.ts';

let bench: FaultBench | undefined;
beforeAll(async () => {
  bench = await startFaultBench('aws', { awsQuotas: true });
});
afterAll(async () => {
  await bench?.close();
});

describe('throttling: moto behind the quota proxy', () => {
  for (const spec of casesFor('aws', THROTTLE_CASES)) {
    it(caseName(spec, 'aws'), async (ctx) => {
      if (!bench) return ctx.skip();
      await runInProcessCase(ctx, bench, spec);
    });
  }
});

/** Keys of the busy-account emergency, and the share of the write quota the other writers leave. */
const BUSY_KEYS = 20;
const LEFT_FOR_KEYROLL = { write: 10 } as const;

describe('an emergency in a busy account', () => {
  it(
    `rotates ${String(BUSY_KEYS)} keys at concurrency 16 with a fifth of the write quota left: none failed, none lost, every throttle counted`,
    { timeout: 180_000 },
    async (ctx) => {
      if (!bench) return ctx.skip();
      const world = bench;
      const { store } = world;
      const upstream = store.proxy?.url;
      if (upstream === undefined) throw new Error('the AWS store has a fault proxy');
      // Other writers spend 40 of the account's 50 writes per second: keyroll meets a quota of 10.
      const busy = await startAwsQuotaProxy({ upstream, rates: LEFT_FOR_KEYROLL });
      let runtime: Runtime | undefined;
      try {
        const keys: CaseKey[] = [];
        for (let i = 0; i < BUSY_KEYS; i++) keys.push(await world.newKey(`busy account ${String(i)}`));
        const lines: string[] = [];
        const audit = createAuditLog({
          destination: { write: (line: string) => void lines.push(line) },
          level: 'debug',
        });
        const policy = world.policy(keys, { safetyNet: 'none', sinkUrl: `${world.receiver.url}/alerts` });
        const primary = policy.backends.primary;
        if (primary?.kind !== 'aws') throw new Error('the AWS store is the primary');
        policy.backends.primary = { ...primary, endpoint: busy.url };
        const bodiesBefore = world.receiver.requests.length;
        let counted = 0;
        runtime = await createRuntime(policy, {
          audit,
          alerter: createAlerter({ sinks: policy.alerts.sinks, audit }),
          credentials: staticCredential(new Secret(OWNER_TOKEN), 'fault-suite owner token'),
          env: { ...store.env },
          observer: {
            stepDuration: () => undefined,
            exposure: () => undefined,
            throttled: () => {
              counted++;
            },
          },
        });
        const summary = await runRotations(runtime, {
          keys: policy.keys,
          trigger: { reason: 'leak', force: true, actor: 'fault-suite' },
          concurrency: 16,
        });
        const copies = await Promise.all(keys.map((key) => world.copiesOf(key)));
        const states = await Promise.all(keys.map((key) => store.direct.readState(key.target)));
        const verdict = judgeCase({
          keys: keys.map((key, i) => {
            const usable = isUsable(copies[i] ?? { keyId: key.keyId, secrets: [] }, world.emulator);
            const intent = states[i]?.intent !== undefined;
            return {
              keyId: key.keyId,
              usableAfterFault: usable,
              intentAfterFault: intent,
              usableAfterNext: usable,
              intentAfterNext: intent,
            };
          }),
          runs: [summary],
          auditLines: lines,
          alertBodies: world.receiver.requests.slice(bodiesBefore).map((r) => r.raw),
          otherOutput: [
            JSON.stringify(summary),
            ...(await Promise.all(keys.map((key) => world.leftovers(key)))).flat(),
          ],
          emulator: world.emulator,
        });
        verdict.record(ctx, {
          case: `${String(BUSY_KEYS)} keys, leak, a fifth of the write quota left (aws)`,
          fault: 'AWS quota spent by other writers',
          backend: 'aws',
          step: 'run',
          result: summary.failed === 0 ? 'rotated' : 'failed',
        });
        verdict.assertInvariants();
        const failed = summary.outcomes
          .filter((o) => o.result === 'failed')
          .map((o) => `${o.step} ${o.errorCode} ${String(o.detail)}`);
        expect(summary, failed.join('\n')).toMatchObject({ rotated: BUSY_KEYS, failed: 0 });
        const throttled = Object.values(busy.throttledByGroup()).reduce((sum, n) => sum + n, 0);
        expect(throttled, 'the busy account refused some calls').toBeGreaterThan(0);
        expect(counted, 'every refusal met was counted').toBe(throttled);
        expect(
          lines.filter((line) => line.includes('"event":"backend.throttled"')).length,
        ).toBeLessThanOrEqual(throttled);
      } finally {
        await runtime?.close();
        await busy.close();
      }
    },
  );
});

// Issue 27, finding 1: the write reserved before the roll is spent only by that write.
describe('the writes after the roll, with the account booked by other keys', () => {
  for (const order of ['refresh between the reservation and the roll', 'a second AWS destination'] as const) {
    it(
      `${order}: every write after the roll is sent at once, the key rotated`,
      { timeout: 60_000 },
      async (ctx) => {
        if (!bench) return ctx.skip();
        await runQuotaOrderCase(ctx, bench, order);
      },
    );
  }
});

// Issue 27, finding 7: AWS's version quota of a secret, kept by the quota proxy.
describe("a secret at AWS's version quota", () => {
  it(
    'the rotation is refused before its lock: nothing rolled, alerted with KR_BACKEND_VERSION_QUOTA naming the secret',
    { timeout: 60_000 },
    async (ctx) => {
      if (!bench) return ctx.skip();
      await runVersionQuotaCase(ctx, bench);
    },
  );
});
