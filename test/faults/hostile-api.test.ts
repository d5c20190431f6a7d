// Generated bad input, the API side: fast-check builds malformed and hostile roll answers
// (wrong types, missing and extra fields, huge bodies, slow drip, bodies that never end, no
// answer at all, cut connections, invalid JSON, wrong content types, `data.key` present with the
// rest wrong, 4xx/3xx/429 with odd bodies). Each key of a policy meets one of them on its first
// roll; keyroll runs as a child process (`rotate --all --force -o json`) over a batch of such keys.
//
// For every case: no crash (the run ends with its report and summary), no hang past the
// timeouts, the secret stored whenever the answer carried it at `data.key` (and then exactly one
// roll), an unknown outcome probed and rolled again, a refusal failed with its code and one
// alert, a clear audit event (`key.rolled` with `malformedAnswer`, or `key.failed` with a code),
// every key's stored secret working afterwards, and no minted (or fake) secret in any output.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiClient, MAX_SHARED_PAUSE_MS } from '../../src/api/client.ts';
import { staticCredential } from '../../src/api/credentials.ts';
import { RateLimiter } from '../../src/api/rate-limiter.ts';
import { Secret } from '../../src/audit/secret.ts';
import { fakeClock } from '../api/mock-api.ts';
import { findSecrets } from '../support/secret-scan.ts';
import {
  checkAlerted,
  checkNoDoubleRoll,
  checkNotLost,
  recordCase,
  reportedRolls,
  type FaultCaseResult,
  type RunReport,
} from './record.ts';
import { OWNER_TOKEN, type ChildResult } from './b-child.ts';
import { faultSeed } from './b-budget.ts';
import {
  BODY_FAMILIES,
  describeAnswer,
  expectedOutcome,
  hostileAnswerFor,
  type HostileAnswer,
} from './b-hostile-answers.ts';
import { startHostileApi, type HostileApi } from './b-hostile-server.ts';
import { ORG, faultKey, faultPolicyYaml, openWorld, type FaultKey, type FaultWorld } from './b-world.ts';

const SEED = faultSeed();
/** Five answers around each body family: 125 cases. */
const PER_FAMILY = 5;
const CASES: HostileAnswer[] = BODY_FAMILIES.flatMap((family, index) =>
  fc.sample(hostileAnswerFor(family), { seed: SEED + index, numRuns: PER_FAMILY }),
);
const BATCH_SIZE = 12;
/**
 * Keys run side by side in batches of BATCH_SIZE, except a 429: it pauses every caller of the
 * run by design (the limit is per credential), so each 429 case runs alone.
 */
const BATCHES: number[][] = (() => {
  const alone = CASES.flatMap((answer, index) => (answer.status === 429 ? [[index]] : []));
  const shared = CASES.flatMap((answer, index) => (answer.status === 429 ? [] : [index]));
  const grouped = Array.from({ length: Math.ceil(shared.length / BATCH_SIZE) }, (_, batch) =>
    shared.slice(batch * BATCH_SIZE, (batch + 1) * BATCH_SIZE),
  );
  return [...grouped, ...alone];
})();
const HEADERS_MS = 1500;
const BODY_MS = 2000;
/** One unknown outcome costs at most a headers and a body timeout, a backoff and a second roll. */
const KEY_BOUND_MS = 2 * (HEADERS_MS + BODY_MS) + 10_000;

interface KeyReport {
  keyId: string;
  result: string;
  rotationId?: string;
  rolls: number;
  durationMs: number;
  step?: string;
  errorCode?: string;
}

interface BatchRun {
  result: ChildResult;
  report?: { runId: string; keys: KeyReport[] };
  /** Webhook bodies received during this batch. */
  haystacks: string[];
  alerts: ReturnType<FaultWorld['alerts']>;
  seeds: Map<string, string>;
}

const keyOf = (index: number): FaultKey => faultKey(`key_hostile_${index}`, index);

describe(`hostile roll answers, generated (seed ${SEED}): stored when data.key was there, never a crash or a hang`, () => {
  let world: FaultWorld;
  let api: HostileApi;
  const batches = new Map<number, Promise<BatchRun>>();
  let previous: Promise<unknown> = Promise.resolve();

  beforeAll(async () => {
    world = await openWorld();
    api = await startHostileApi(world.emulator);
  });
  afterAll(async () => {
    await api.close();
    await world.close();
  });

  async function runBatch(batch: number): Promise<BatchRun> {
    const indexes = BATCHES[batch] ?? [];
    const keys = indexes.map(keyOf);
    const seeds = new Map<string, string>();
    for (const [position, key] of keys.entries()) {
      world.emulator.state.addApiKey({ id: key.id, name: key.id, organizationId: ORG });
      // A working secret stored ten minutes ago: a probe can then tell "rolled and lost" from "not rolled".
      await world.seedRotated(key, new Date(Date.now() - 10 * 60_000));
      seeds.set(key.id, world.emulator.state.currentSecret(key.id));
      api.script(key.id, CASES[indexes[position] as number] as HostileAnswer);
    }
    const policy = `batch-${batch}.yaml`;
    await world.writeFile(
      policy,
      faultPolicyYaml({
        baseUrl: api.url,
        alertUrl: `${world.receiver.url}/alerts`,
        keys,
        headersMs: HEADERS_MS,
        bodyMs: BODY_MS,
      }),
    );
    const alertsBefore = world.receiver.requests.length;
    const alertCountBefore = world.alerts().length;
    const result = await world.run(
      [
        'rotate',
        '--all',
        '--reason',
        'manual',
        '--force',
        '--concurrency',
        String(keys.length),
        '-o',
        'json',
        '-p',
        policy,
      ],
      { killAfterMs: 120_000 },
    );
    const reportLine = result.stdout.split('\n').find((line) => line.startsWith('{"runId"'));
    return {
      result,
      ...(reportLine ? { report: JSON.parse(reportLine) as BatchRun['report'] } : {}),
      haystacks: [
        result.stdout,
        result.stderr,
        ...world.receiver.requests.slice(alertsBefore).map((request) => request.raw),
      ],
      alerts: world.alerts().slice(alertCountBefore),
      seeds,
    };
  }

  /** Batches run one after another, each started by the first of its cases. */
  function batchOf(index: number): Promise<BatchRun> {
    const batch = BATCHES.findIndex((members) => members.includes(index));
    let run = batches.get(batch);
    if (!run) {
      run = previous.then(() => runBatch(batch));
      previous = run.catch(() => undefined);
      batches.set(batch, run);
    }
    return run;
  }

  it('generates at least 100 hostile answers of every family', () => {
    expect(CASES.length).toBeGreaterThanOrEqual(100);
    expect(BODY_FAMILIES.length).toBeGreaterThanOrEqual(20);
    const deliveries = new Set(CASES.map((answer) => answer.delivery));
    expect([...deliveries].sort()).toEqual([
      'cut-mid-body',
      'drip',
      'drip-forever',
      'no-headers',
      'reset',
      'whole',
    ]);
    expect(CASES.some((answer) => answer.status === 429)).toBe(true);
    expect(CASES.some((answer) => answer.status >= 500 && !answer.applies)).toBe(true);
  });

  for (const [index, answer] of CASES.entries()) {
    it(`#${index} ${describeAnswer(answer)}`, async (ctx) => {
      const batch = await batchOf(index);
      const key = keyOf(index);
      const log = api.log(key.id);
      const seed = batch.seeds.get(key.id) as string;
      const expected = expectedOutcome(answer, log.body ?? '', log.embedded, key.id);
      const outcome = batch.report?.keys.find((k) => k.keyId === key.id);
      const events = batch.result.events.filter((event) => event.keyId === key.id);
      const stored = await world.storedSecret(key);
      const mine = batch.alerts.filter((alert) => alert.keyId === key.id);

      const lost = checkNotLost([{ keyId: key.id, secrets: [stored] }], (keyId, secret) =>
        world.emulator.state.isLiveSecret(keyId, secret),
      );
      const leaks = findSecrets(batch.haystacks, [
        seed,
        ...log.minted,
        ...(log.embedded ? [log.embedded] : []),
        OWNER_TOKEN,
      ]);
      const report: RunReport = {
        runId: batch.report?.runId ?? 'no-report',
        outcomes: outcome ? [outcome] : [],
      };
      const alerted = checkAlerted([report], mine);
      const rolls = checkNoDoubleRoll([
        {
          keyId: key.id,
          emulatorRolls: world.emulator.state.rollCount(key.id),
          reportedRolls: reportedRolls(events, key.id),
        },
      ]);
      recordCase(ctx, {
        case: `hostile #${index}: ${describeAnswer(answer)}`,
        fault: `roll answer: ${answer.body.label}`,
        backend: 'emulator',
        step: 'roll',
        result: (outcome?.result ?? 'aborted') as FaultCaseResult,
        lost: lost.lost,
        leaked: leaks.leaked,
        alerted: alerted.alerted,
        failures: alerted.failures,
      });

      // No crash, no hang: the run ended by itself with its report and summary; a run the
      // watchdog killed names the keys that never finished.
      const finished = events.some(
        (event) => event.event === 'key.succeeded' || event.event === 'key.failed',
      );
      expect(finished, `the rotation of ${key.id} never finished`).toBe(true);
      expect(batch.result.signal, 'killed by the watchdog: a hang').toBeNull();
      expect([0, 1], batch.result.stderr).toContain(batch.result.code);
      expect(batch.result.summary, batch.result.lastLine).toBeDefined();
      expect(batch.result.stderr).not.toMatch(/\n\s+at |Uncaught|TypeError|RangeError/);
      expect(outcome, 'the key is in the report').toBeDefined();
      expect(outcome?.durationMs).toBeLessThanOrEqual(KEY_BOUND_MS);

      // What keyroll did with the answer.
      const rolled = events.find((event) => event.event === 'key.rolled');
      const failed = events.find((event) => event.event === 'key.failed');
      switch (expected.kind) {
        case 'stored-first':
          expect(outcome?.result).toBe('rotated');
          expect(stored === log.minted[0], 'the secret of the answer is the one stored').toBe(true);
          expect(log.rollRequests).toBe(1);
          expect(
            rolled?.malformedAnswer !== undefined,
            `malformedAnswer: ${String(rolled?.malformedAnswer)}`,
          ).toBe(expected.malformed);
          break;
        case 'rerolled': {
          expect(outcome?.result).toBe('rotated');
          expect(log.rollRequests).toBe(2);
          expect(stored === log.minted.at(-1), 'the secret of the second roll is the one stored').toBe(true);
          expect(events.find((event) => event.event === 'key.probe')).toMatchObject({
            step: 'roll',
            verdict: expected.probe,
          });
          expect(rolled).toMatchObject({ unknownOutcomes: [expected.probe], rolls: 2 });
          break;
        }
        case 'rate-limited':
          if (expected.fails) {
            expect(outcome).toMatchObject({ result: 'failed', errorCode: 'KR_API_RATE_LIMITED' });
            expect(stored === seed, 'the stored secret is untouched').toBe(true);
          } else {
            expect(outcome?.result).toBe('rotated');
            expect(events.some((event) => event.event === 'key.roll.retry' && event.status === 429)).toBe(
              true,
            );
            expect(stored === log.minted.at(-1)).toBe(true);
          }
          break;
        case 'refused':
          expect(outcome).toMatchObject({ result: 'failed', step: 'roll', errorCode: expected.errorCode });
          expect(log.rollRequests).toBe(1);
          expect(stored === seed, 'the stored secret is untouched').toBe(true);
          expect(failed).toMatchObject({ step: 'roll', errorCode: expected.errorCode });
          expect(mine).toEqual([expect.objectContaining({ step: 'roll', errorCode: expected.errorCode })]);
          break;
      }
      // A clear audit event either way.
      expect(
        rolled !== undefined ||
          (typeof failed?.errorCode === 'string' && /^KR_[A-Z_]+$/.test(failed.errorCode)),
        'key.rolled or key.failed with a code',
      ).toBe(true);
      if (outcome?.result === 'rotated') expect(mine, 'no alert for a success').toEqual([]);

      // The four questions.
      expect(lost.lostKeys).toEqual([]);
      expect(alerted.problems).toEqual([]);
      expect(rolls.problems).toEqual([]);
      expect(leaks.hits).toEqual([]);
    }, 180_000);
  }
});

describe('a 429 whose Retry-After is far past the run budget', () => {
  // One key's 429 pauses every caller of the run (the limit is per credential). A Retry-After of
  // 99999 s must not hold the run's other keys for a day: the pause stops at the run's 429 budget.
  // The limiter's clock and sleep are injected, so the pause is measured, not waited out.
  it('pauses the other callers for at most the run budget, then they go on', async (ctx) => {
    const clock = fakeClock(1_700_000_000_000);
    const limiter = new RateLimiter({ perMinute: 60_000, now: clock.now, sleep: clock.sleep });
    let calls = 0;
    const server = createServer((_req, res) => {
      calls++;
      if (calls === 1) {
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '99999' });
        res.end(JSON.stringify({ success: false, error: { code: 'RATE_LIMITED', message: 'slow down' } }));
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ success: true, data: [], pagination: { nextCursor: null, hasMore: false } }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const client = new ApiClient({
      baseUrl: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
      credentials: staticCredential(new Secret(OWNER_TOKEN), 'test token'),
      limiter,
    });
    try {
      const refused = await client.listProjects({ limit: 1 }).then(
        () => undefined,
        (error: unknown) => error,
      );
      const next = await client.listProjects({ limit: 1 });
      const pausedMs = clock.sleeps.reduce((total, ms) => total + ms, 0);
      recordCase(ctx, {
        case: 'hostile: 429 with Retry-After 99999, the next caller',
        fault: 'roll answer: 429 Retry-After 99999',
        backend: 'emulator',
        step: 'roll',
        result: 'rotated',
        lost: 0,
        leaked: 0,
        alerted: 0,
        failures: 0,
      });

      expect(refused).toMatchObject({ code: 'KR_API_RATE_LIMITED', retryAfterMs: 99_999_000 });
      expect(next.projects).toEqual([]);
      expect(pausedMs, 'the next caller waited for the pause').toBeGreaterThan(0);
      // The pause, then at most the wait for one token of the steady rate (1 ms at 60,000/min).
      expect(pausedMs).toBeLessThanOrEqual(MAX_SHARED_PAUSE_MS + 1_000);
    } finally {
      await client.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => {
        server.close(() => {
          resolve();
        });
      });
    }
  });
});
