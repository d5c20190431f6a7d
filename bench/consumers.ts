// Benchmark 7: what a scheduled rotation costs the services that use the key (invariant 10).
// Consumers read their secret from the file backend through a cache with a TTL and call the API
// with it without pause, while `keyroll run` (the CronJob command, the bundled CLI as the image
// runs it) fires every second against a policy on a fast schedule, until each population has
// had at least 100 rotations. Two populations in the same run, same schedule:
//   - single: single-key entries; each roll kills the value consumers hold;
//   - alternating: two-slot entries whose consumerRefresh (5 s) is above the consumers' TTL (2 s);
//   - singleNotified: single-key entries that list a `webhook` consumer (invariant 12): their
//     consumers drop their cache as soon as keyroll's success notice for the key arrives (a
//     loopback webhook, bench/lib/notice-receiver.ts), as a service outside Kubernetes would.
// `consumerErrors.<population>` counts consumer calls answered 401. The goal: 0 for alternating,
// above 0 for single, singleNotified at most 5 % of single (consumerErrors.singleNotifiedShare). A control population, `overstaying` (details only), reads the slot entries
// through a cache of 8 s, longer than their consumerRefresh: it must see failures, which shows
// the zero is the rule at work and not a measurement that cannot see a dead slot.
//
// Everything runs on the real clock, at a scale of seconds rather than hours: keyroll's due-ness
// (maxAge, minInterval), its consumerRefresh rule and the consumers' TTL all read the wall clock,
// so the comparison between them is the one production makes. Nothing is faked; the policy is
// an ordinary YAML file that `keyroll validate` accepts (its refusals of a schedule that could
// roll a slot sooner than consumerRefresh included). What the scale changes: a consumer's request
// that takes longer than consumerRefresh − TTL (3 s here) could still meet a dead slot, as one
// taking longer than an hour's margin would in production; a stalled machine shows here first.
// The emulator and the consumers run in the bench process; keyroll in its own processes.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent } from 'undici';
import { runCli } from './lib/cli.ts';
import { Consumer, tallyByPopulation, type ConsumerTally } from '../test/support/secret-consumer.ts';
import type { BenchResult } from './lib/figures.ts';
import { startNoticeReceiver } from './lib/notice-receiver.ts';
import { round } from './lib/stats.ts';
import { OWNER_TOKEN, startWorld, type BenchKey, type World } from './lib/world.ts';

/** Entries per population. */
const ENTRIES = 10;
/** Consumers reading each entry's value (replicas of one service), started at spread phases. */
const CONSUMERS_PER_ENTRY = 2;
const CONSUMER_TTL_MS = 2_000;
/** The control: one consumer per slot entry whose cache outlives consumerRefresh. */
const OVERSTAYING_TTL_MS = 8_000;
/** maxAge and minInterval of every entry, and consumerRefresh of the slot entries. */
const PERIOD = '5s';
const CONSUMER_REFRESH = '5s';
const CALL_EVERY_MS = 200;
/** `keyroll run` starts this often (or as soon as the previous one exits, if it takes longer). */
const RUN_EVERY_MS = 1_000;
const ROTATIONS_TARGET = 100;
const QUICK_ROTATIONS_TARGET = 30;
const TIME_LIMIT_MS = 300_000;

type Population = 'single' | 'alternating' | 'singleNotified';
const POPULATIONS: readonly Population[] = ['single', 'alternating', 'singleNotified'];
/** The webhook sink the singleNotified entries list as their consumer. */
const NOTICE_SINK = 'cache-drop';
const CONTROL = 'overstaying';

interface Entry {
  population: Population;
  /** The entry id (the API key id of a single key). */
  id: string;
  /** The API keys behind it. */
  keyIds: readonly string[];
  file: string;
}

/** What keyroll's audit lines said over all scheduled runs. */
interface RunTally {
  runs: number;
  runsNotZero: number;
  rotated: Record<Population, number>;
  failed: number;
  /** Slot rotations that probed the previous active secret after storing the new one. */
  previousActiveChecked: number;
  /** … and found it dead (should be none). */
  previousActiveDead: number;
  skippedConsumerRefresh: number;
}

function entries(world: World, secretsDir: string): Entry[] {
  const out: Entry[] = [];
  for (let i = 0; i < ENTRIES; i++) {
    const n = String(i).padStart(2, '0');
    const single = `key_cons_single_${n}`;
    world.emulator.state.addApiKey({ id: single, name: single, organizationId: 'org_demo_acme' });
    out.push({
      population: 'single',
      id: single,
      keyIds: [single],
      file: join(secretsDir, `${single}.json`),
    });
    const slots = [`key_cons_alt_${n}a`, `key_cons_alt_${n}b`] as const;
    for (const id of slots) world.emulator.state.addApiKey({ id, name: id, organizationId: 'org_demo_acme' });
    out.push({
      population: 'alternating',
      id: `cons_alt_${n}`,
      keyIds: slots,
      file: join(secretsDir, `cons_alt_${n}.json`),
    });
    const notified = `key_cons_notified_${n}`;
    world.emulator.state.addApiKey({ id: notified, name: notified, organizationId: 'org_demo_acme' });
    out.push({
      population: 'singleNotified',
      id: notified,
      keyIds: [notified],
      file: join(secretsDir, `${notified}.json`),
    });
  }
  return out;
}

function benchKey(entry: Entry): BenchKey {
  const base = { id: entry.id, backend: 'files', path: `${entry.id}.json` };
  const [a, b] = entry.keyIds;
  if (entry.population === 'singleNotified')
    return { ...base, consumers: `[{ kind: webhook, sink: ${NOTICE_SINK} }]` };
  return entry.population === 'alternating' && a !== undefined && b !== undefined
    ? { ...base, slots: [a, b], consumerRefresh: CONSUMER_REFRESH }
    : base;
}

/** Reads one `keyroll run`'s audit lines (stdout, JSON) into the tally. */
function countRun(stdout: string, populationOf: ReadonlyMap<string, Population>, tally: RunTally): void {
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    const record = JSON.parse(line) as {
      event?: string;
      keyId?: string;
      why?: string;
      previousActiveWorks?: boolean;
    };
    const population = record.keyId === undefined ? undefined : populationOf.get(record.keyId);
    if (record.event === 'key.succeeded' && population) tally.rotated[population]++;
    else if (record.event === 'key.failed') tally.failed++;
    else if (record.event === 'key.verified' && record.previousActiveWorks !== undefined) {
      tally.previousActiveChecked++;
      if (!record.previousActiveWorks) tally.previousActiveDead++;
    } else if (record.event === 'key.skipped' && record.why === 'consumer-refresh')
      tally.skippedConsumerRefresh++;
  }
}

/** Entries whose stored secret is not live at the end: rolled and lost (should be none). */
async function countLost(world: World, list: readonly Entry[]): Promise<number> {
  let lost = 0;
  for (const entry of list) {
    const stored = JSON.parse(await readFile(entry.file, 'utf8')) as { apiKey?: string; keyId?: string };
    if (
      stored.apiKey === undefined ||
      stored.keyId === undefined ||
      !world.emulator.state.isLiveSecret(stored.keyId, stored.apiKey)
    )
      lost++;
  }
  return lost;
}

export async function runConsumersBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const target = options.quick ? QUICK_ROTATIONS_TARGET : ROTATIONS_TARGET;
  const world = await startWorld({ rollRateLimitPerMinute: 6_000 });
  const dispatcher = new Agent({ connections: 8 });
  // Each singleNotified consumer drops its cache when the notice of its key arrives.
  const listeners = new Map<string, Consumer[]>();
  const receiver = await startNoticeReceiver((keyId) => {
    for (const c of listeners.get(keyId) ?? []) c.dropCache();
  });
  try {
    const secretsDir = join(world.dir, 'secrets');
    const list = entries(world, secretsDir);
    const policy = await world.writePolicy('policy.yaml', {
      rateLimitPerMinute: 6_000,
      backends: `  files: { kind: file, directory: ${secretsDir} }`,
      defaults: `  maxAge: ${PERIOD}\n  minInterval: ${PERIOD}`,
      keys: list.map(benchKey),
      sinks: `    ${NOTICE_SINK}: { kind: webhook, url: "${receiver.url}" }`,
    });
    const cli = (args: string[]): ReturnType<typeof runCli> =>
      runCli([...args, '--policy', policy], {
        cwd: world.dir,
        env: { KEYROLL_API_TOKEN: OWNER_TOKEN },
        timeoutMs: 60_000,
      });

    // The policy is one keyroll accepts, with its consumerRefresh rules.
    const validate = await cli(['validate']);
    if (validate.code !== 0)
      throw new Error(
        `keyroll validate exited ${String(validate.code)}:\n${validate.stderr.slice(-2000)}${validate.stdout.slice(-2000)}`,
      );
    // The first run stores every entry's first secret (none was ever rotated); consumers start after it.
    const first = await cli(['run']);
    if (first.code !== 0)
      throw new Error(`the first keyroll run exited ${String(first.code)}:\n${first.stderr.slice(-2000)}`);

    const consumer = (population: string, file: string, ttlMs: number): Consumer =>
      new Consumer({
        population,
        file,
        secretField: 'apiKey',
        ttlMs,
        apiUrl: world.emulator.url,
        now: () => Date.now(),
        dispatcher,
      });
    const consumers = [
      ...list.flatMap((entry) =>
        Array.from({ length: CONSUMERS_PER_ENTRY }, () => {
          const c = consumer(entry.population, entry.file, CONSUMER_TTL_MS);
          if (entry.population === 'singleNotified')
            listeners.set(entry.id, [...(listeners.get(entry.id) ?? []), c]);
          return c;
        }),
      ),
      ...list
        .filter((entry) => entry.population === 'alternating')
        .map((entry) => consumer(CONTROL, entry.file, OVERSTAYING_TTL_MS)),
    ];
    let stopped = false;
    const loops = consumers.map(async (c, index) => {
      // Spread the consumers' refreshes over the TTL, as independent replicas would be.
      await sleep(Math.round((index / consumers.length) * CONSUMER_TTL_MS));
      while (!stopped) {
        await c.call();
        await sleep(CALL_EVERY_MS);
      }
    });

    const populationOf = new Map(list.map((e) => [e.id, e.population]));
    const runs: RunTally = {
      runs: 0,
      runsNotZero: 0,
      rotated: { single: 0, alternating: 0, singleNotified: 0 },
      failed: 0,
      previousActiveChecked: 0,
      previousActiveDead: 0,
      skippedConsumerRefresh: 0,
    };
    const began = performance.now();
    const runWallMs: number[] = [];
    try {
      while (POPULATIONS.some((p) => runs.rotated[p] < target)) {
        if (performance.now() - began > TIME_LIMIT_MS)
          throw new Error(
            `only ${String(runs.rotated.single)} single and ${String(runs.rotated.alternating)} slot rotations in ${String(TIME_LIMIT_MS / 1000)} s`,
          );
        const runStarted = performance.now();
        const run = await cli(['run']);
        runs.runs++;
        runWallMs.push(run.wallMs);
        if (run.code !== 0) runs.runsNotZero++;
        countRun(run.stdout, populationOf, runs);
        await sleep(Math.max(0, RUN_EVERY_MS - (performance.now() - runStarted)));
      }
      // The last rolls' consumers fail until their next refresh: let every cache expire once more.
      await sleep(CONSUMER_TTL_MS + 2 * CALL_EVERY_MS);
    } finally {
      stopped = true;
      await Promise.all(loops);
    }
    const wallS = (performance.now() - began) / 1000;

    const tally = tallyByPopulation(consumers);
    const of = (population: string): ConsumerTally & { consumers: number } => {
      const t = tally[population];
      if (!t) throw new Error(`no consumers of ${population}`);
      return t;
    };
    const slotRolls = list
      .filter((e) => e.population === 'alternating')
      .flatMap((e) => e.keyIds.map((id) => world.emulator.state.rollCount(id)));
    const lost = await countLost(world, list);
    const single = of('single');
    const alternating = of('alternating');
    const notified = of('singleNotified');
    const perRotationOutageS = (t: ConsumerTally & { consumers: number }, rotations: number): number =>
      rotations === 0 ? 0 : round(t.outageMs / 1000 / (rotations * CONSUMERS_PER_ENTRY), 3);

    return {
      figures: [
        {
          name: 'consumerErrors.single',
          value: single.unauthorized,
          unit: 'calls',
          goal: { op: '>=', target: 1 },
        },
        {
          name: 'consumerErrors.alternating',
          value: alternating.unauthorized,
          unit: 'calls',
          goal: { op: '==', target: 0 },
        },
        { name: 'consumerErrors.singleNotified', value: notified.unauthorized, unit: 'calls' },
        {
          name: 'consumerErrors.singleNotifiedShare',
          value:
            single.unauthorized === 0 ? Number.NaN : round(notified.unauthorized / single.unauthorized, 4),
          unit: '×',
          goal: { op: '<=', target: 0.05 },
        },
        { name: 'consumerCalls.single', value: single.calls, unit: 'calls' },
        { name: 'consumerCalls.alternating', value: alternating.calls, unit: 'calls' },
        { name: 'consumerCalls.singleNotified', value: notified.calls, unit: 'calls' },
        {
          name: 'consumerRotations.single',
          value: runs.rotated.single,
          unit: '',
          goal: { op: '>=', target: ROTATIONS_TARGET },
        },
        {
          name: 'consumerRotations.alternating',
          value: runs.rotated.alternating,
          unit: '',
          goal: { op: '>=', target: ROTATIONS_TARGET },
        },
        {
          name: 'consumerRotations.singleNotified',
          value: runs.rotated.singleNotified,
          unit: '',
          goal: { op: '>=', target: ROTATIONS_TARGET },
        },
      ],
      details: {
        populations: Object.fromEntries(
          POPULATIONS.map((p) => {
            const t = of(p);
            return [
              p,
              {
                entries: ENTRIES,
                consumers: t.consumers,
                rotations: runs.rotated[p],
                calls: t.calls,
                ok: t.ok,
                unauthorized: t.unauthorized,
                errorShare: t.calls === 0 ? 0 : round(t.unauthorized / t.calls, 4),
                rateLimited: t.rateLimited,
                otherErrors: t.other,
                fileReads: t.reads,
                outageSeconds: round(t.outageMs / 1000, 2),
                outageSecondsPerConsumerPerRotation: perRotationOutageS(t, runs.rotated[p]),
                longestOutageMs: t.longestOutageMs,
              },
            ];
          }),
        ),
        control: {
          population: CONTROL,
          what: `one consumer per slot entry with a ${String(OVERSTAYING_TTL_MS / 1000)} s cache, longer than consumerRefresh (${CONSUMER_REFRESH}): breaks the rule, so it must see 401s`,
          consumers: of(CONTROL).consumers,
          calls: of(CONTROL).calls,
          unauthorized: of(CONTROL).unauthorized,
          otherErrors: of(CONTROL).other,
        },
        keyrollRuns: runs.runs,
        keyrollRunsNotZero: runs.runsNotZero,
        keyrollRunWallMsMedian:
          runWallMs.length === 0
            ? 0
            : round([...runWallMs].sort((a, b) => a - b)[Math.floor(runWallMs.length / 2)] ?? 0, 1),
        failedRotations: runs.failed,
        previousActiveChecked: runs.previousActiveChecked,
        previousActiveDead: runs.previousActiveDead,
        skippedConsumerRefresh: runs.skippedConsumerRefresh,
        slotRollsMin: Math.min(...slotRolls),
        slotRollsMax: Math.max(...slotRolls),
        lost,
        notices: [...receiver.arrivals.values()].reduce((sum, list) => sum + list.length, 0),
        wallSeconds: round(wallS, 1),
        settings: {
          consumerTtlMs: CONSUMER_TTL_MS,
          consumerRefresh: CONSUMER_REFRESH,
          maxAge: PERIOD,
          minInterval: PERIOD,
          callEveryMs: CALL_EVERY_MS,
          runEveryMs: RUN_EVERY_MS,
          consumersPerEntry: CONSUMERS_PER_ENTRY,
          clock: 'real (wall clock) for keyroll and the consumers',
          keyroll:
            '`keyroll run` (dist/, as the image runs it) every second; the first run, before the consumers start, is not counted',
        },
      },
      notes: [
        `consumers: ${String(ENTRIES)} single-key and ${String(ENTRIES)} two-slot entries (maxAge = minInterval = ${PERIOD}; slots: consumerRefresh ${CONSUMER_REFRESH}), ${String(CONSUMERS_PER_ENTRY)} consumers each reading the file backend through a ${String(CONSUMER_TTL_MS / 1000)} s cache and calling the API every ${String(CALL_EVERY_MS)} ms; \`keyroll run\` every ${String(RUN_EVERY_MS / 1000)} s on the real clock; errors = consumer calls answered 401`,
        `consumers: singleNotified — ${String(ENTRIES)} single-key entries listing a webhook consumer; their consumers drop the cache when keyroll's notice of the key arrives (otherwise as single)`,
        `consumers: control — ${String(of(CONTROL).consumers)} consumers of the slot entries with a ${String(OVERSTAYING_TTL_MS / 1000)} s cache (above consumerRefresh): ${String(of(CONTROL).unauthorized)} of ${String(of(CONTROL).calls)} calls answered 401`,
      ],
    };
  } finally {
    await receiver.close();
    await dispatcher.close();
    await world.close();
  }
}
