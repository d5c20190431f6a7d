// The daemon half of `npm run bench -- crd` (issue 31): a real `keyroll daemon --keys-from
// kubernetes` process (dist/, as the image runs it) on its own kube-apiserver with the keyroll.io
// CRDs, rotating through the emulator into a file ClusterKeyStore, each key's webhook consumer told
// at a loopback receiver (bench/lib/crd-daemon-world.ts). The daemon talks to the API server
// through a counting front (bench/lib/kube-front.ts); the bench watches the RotatedKeys itself,
// straight to the API server (bench/lib/status-watch.ts).
//   1. With the daemon running, KEYS RotatedKeys are created over 10 team namespaces, 16 create
//      calls in flight. crd.firstStatusMs.{p50,p99,max}: per object, the create call's answer →
//      the first status the bench's watch saw on it (crd.readyMs.p99: → Ready=True). Each new key
//      is due at once (never rotated), so the daemon rotates every one; that phase's status
//      writes per rotation are crd.statusWritesPerFirstRotation.
//   2. crd.daemonRssMb.<KEYS>: the daemon's RSS (VmRSS) once every key is Ready and it is quiet.
//   3. `keyroll.io/rotate-now: "manual: bench"` on a sample of SAMPLE keys (16 patches in flight;
//      the keys have minInterval 1s, so `manual` is served). crd.statusWritesPerRotation: the
//      `PATCH rotatedkeys/status` the API server took (2xx at the front) from the first annotation
//      until the daemon is quiet, over the rolls the emulator served meanwhile (goal ≤ 2: the
//      outcome with the settled request, and the consumers' delivery).
import { setTimeout as sleep } from 'node:timers/promises';
import type { BenchResult, Figure } from './lib/figures.ts';
import {
  CONCURRENCY,
  startCrdDaemonWorld,
  TEAMS,
  type BenchKey,
  type CrdDaemonWorld,
} from './lib/crd-daemon-world.ts';
import type { KubeFront } from './lib/kube-front.ts';
import { percentile, round } from './lib/stats.ts';
import { condition } from './lib/status-watch.ts';

const FULL = { keys: 1_000, sample: 100, settleMs: 600_000 };
const QUICK = { keys: 100, sample: 20, settleMs: 180_000 };
/** No write by the daemon for this long: its work for the phase is done. */
const QUIET_MS = 3_000;
const ROTATE_NOW = 'manual: bench';
const ANNOTATION = 'keyroll.io/rotate-now';

interface Counts {
  /** Status patches the API server took. */
  patched: number;
  /** Status patches refused 409 (the daemon reads again and retries). */
  conflicts: number;
  /** Patches of the object itself (the settled annotation's removal; 422 when already gone). */
  annotations: number;
  events: number;
}

function countsAt(front: KubeFront): Counts {
  return {
    patched: front.count('PATCH', 'rotatedkeys/status', 200),
    conflicts: front.count('PATCH', 'rotatedkeys/status', 409),
    annotations: front.count('PATCH', 'rotatedkeys'),
    events: front.count('POST', 'events'),
  };
}

function since(before: Counts, front: KubeFront): Counts {
  const now = countsAt(front);
  return {
    patched: now.patched - before.patched,
    conflicts: now.conflicts - before.conflicts,
    annotations: now.annotations - before.annotations,
    events: now.events - before.events,
  };
}

/** Runs `work` over `items` with CONCURRENCY in flight. */
async function eachLimited<T>(items: readonly T[], work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++];
      if (item !== undefined) await work(item);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** What the daemon sent that is not a read: its writes (status, annotation, Events). */
function writesSent(front: KubeFront): number {
  return Object.entries(front.counts())
    .filter(([kind]) => !kind.startsWith('GET ') && !kind.startsWith('WATCH '))
    .reduce((sum, [, n]) => sum + n, 0);
}

/** Waits until `done()` holds and the daemon sent no write for QUIET_MS; throws after `limitMs`. */
async function settle(what: string, at: CrdDaemonWorld, limitMs: number, done: () => boolean): Promise<void> {
  const by = performance.now() + limitMs;
  let last = writesSent(at.front);
  let quietSince = performance.now();
  for (;;) {
    await sleep(250);
    const now = writesSent(at.front);
    if (now !== last) [last, quietSince] = [now, performance.now()];
    if (done() && performance.now() - quietSince >= QUIET_MS) return;
    if (at.daemon.child.exitCode !== null)
      throw new Error(`the daemon exited during ${what}:\n${at.daemon.tail.join('\n')}`);
    if (performance.now() > by)
      throw new Error(`${what} not done within ${String(limitMs / 1000)} s:\n${at.daemon.tail.join('\n')}`);
  }
}

const spread = (values: readonly number[]): { p50: number; p99: number; max: number } => {
  const finite = values.filter(Number.isFinite);
  if (finite.length === 0) return { p50: Number.NaN, p99: Number.NaN, max: Number.NaN };
  return {
    p50: round(percentile(finite, 50), 0),
    p99: round(percentile(finite, 99), 0),
    max: round(percentile(finite, 100), 0),
  };
};

/** How many of `times` fell in each whole second after `from`. */
function perSecond(times: readonly number[], from: number): number[] {
  const buckets: number[] = [];
  for (const at of times) {
    const second = Math.floor((at - from) / 1_000);
    if (second < 0) continue;
    while (buckets.length <= second) buckets.push(0);
    buckets[second] = (buckets[second] ?? 0) + 1;
  }
  return buckets;
}

/** Phase 1: the keys created while the daemon runs, until each is Ready and the daemon quiet. */
async function createPhase(at: CrdDaemonWorld, keys: BenchKey[], limitMs: number) {
  const before = countsAt(at.front);
  const cpuBefore = await at.daemon.cpuSeconds();
  const started = performance.now();
  await eachLimited(keys, (key) => at.createKey(key));
  const createMs = performance.now() - started;
  await settle('phase 1 (every key Ready)', at, limitMs, () =>
    keys.every((key) => condition(at.watch.status(key.object), 'Ready')?.status === 'True'),
  );
  const phaseMs = performance.now() - started;
  const daemonCpuShare = round(((await at.daemon.cpuSeconds()) - cpuBefore) / (phaseMs / 1_000), 2);
  const after = (seen: Map<string, number>, from: (key: BenchKey) => number): number[] =>
    keys.map((key) => (seen.get(key.object) ?? Number.NaN) - from(key));
  const created = (key: BenchKey): number => key.createdAt ?? Number.NaN;
  // Where the time went: create → the first generation swapped in after it → its first status.
  const swaps = at.daemon.times.get('policy.reloaded') ?? [];
  const swapOf = (key: BenchKey): number =>
    swaps.find((swap) => swap >= (key.createdAt ?? Number.POSITIVE_INFINITY)) ?? Number.NaN;
  return {
    createMs,
    counts: since(before, at.front),
    rolls: keys.reduce((sum, key) => sum + at.world.emulator.state.rollCount(key.id), 0),
    firstStatus: after(at.watch.firstStatusAt, created),
    ready: after(at.watch.firstReadyAt, created),
    toSwap: keys.map((key) => swapOf(key) - created(key)),
    swapToStatus: after(at.watch.firstStatusAt, swapOf),
    /** Seconds from the first create call to each generation swapped in (the start's is negative). */
    swaps: swaps.map((swap) => round((swap - started) / 1_000, 2)),
    phaseSeconds: round(phaseMs / 1_000, 1),
    /** The daemon's CPU time over the phase's wall time (1 = one core busy throughout). */
    daemonCpuShare,
    /** The API server's answer times to the daemon's status patches and Events (at the front). */
    patchMs: spread(at.front.latencies('PATCH rotatedkeys/status 200')),
    eventMs: spread(at.front.latencies('POST events 201')),
    /** Status patches taken in each second from the first create call: the writer's pace. */
    writesPerSecond: perSecond(at.front.times('PATCH rotatedkeys/status 200'), started),
  };
}

/** Phase 3: rotate-now on `sample`, until each request is settled, its annotation gone, the daemon quiet. */
async function rotateNowPhase(at: CrdDaemonWorld, keys: BenchKey[], sample: BenchKey[], limitMs: number) {
  const rollCount = (key: BenchKey): number => at.world.emulator.state.rollCount(key.id);
  const rollsBefore = new Map(keys.map((key) => [key.id, rollCount(key)]));
  const changesBefore = new Map(at.watch.statusChanges);
  const before = countsAt(at.front);
  await eachLimited(sample, (key) => at.annotate(key, ANNOTATION, ROTATE_NOW));
  await settle('phase 3 (every rotate-now settled)', at, limitMs, () =>
    sample.every((key) => {
      const status = at.watch.status(key.object);
      return (
        rollCount(key) > (rollsBefore.get(key.id) ?? 0) &&
        at.watch.object(key.object)?.metadata?.annotations?.[ANNOTATION] === undefined &&
        status?.rotateNow?.value === ROTATE_NOW &&
        status.rotateNow.outcome !== undefined
      );
    }),
  );
  return {
    counts: since(before, at.front),
    rolls: keys.reduce((sum, key) => sum + rollCount(key) - (rollsBefore.get(key.id) ?? 0), 0),
    statusChangesSeenByWatch: sample.reduce(
      (sum, key) =>
        sum + (at.watch.statusChanges.get(key.object) ?? 0) - (changesBefore.get(key.object) ?? 0),
      0,
    ),
  };
}

export async function runCrdDaemonBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const size = options.quick ? QUICK : FULL;
  const at = await startCrdDaemonWorld();
  try {
    const keys = at.addKeys(size.keys);
    const created = await createPhase(at, keys, size.settleMs);
    const memory = await at.daemon.memory();
    const step = Math.floor(size.keys / size.sample);
    const sample = keys.filter((_, index) => index % step === 0).slice(0, size.sample);
    const rotated = await rotateNowPhase(at, keys, sample, size.settleMs);
    const exitCode = await at.daemon.stop();
    const label = size.keys >= 1_000 ? `${String(size.keys / 1_000)}k` : String(size.keys);
    const perRoll = (writes: number, rolls: number): number =>
      rolls === 0 ? Number.NaN : round(writes / rolls, 2);
    const firstStatus = spread(created.firstStatus);
    const figures: Figure[] = [
      { name: 'crd.firstStatusMs.p50', value: firstStatus.p50, unit: 'ms' },
      { name: 'crd.firstStatusMs.p99', value: firstStatus.p99, unit: 'ms' },
      { name: 'crd.firstStatusMs.max', value: firstStatus.max, unit: 'ms' },
      { name: 'crd.readyMs.p99', value: spread(created.ready).p99, unit: 'ms' },
      {
        name: 'crd.statusWritesPerRotation',
        value: perRoll(rotated.counts.patched, rotated.rolls),
        unit: 'writes',
        goal: { op: '<=', target: 2 },
      },
      {
        name: 'crd.statusWritesPerFirstRotation',
        value: perRoll(created.counts.patched, created.rolls),
        unit: 'writes',
      },
      { name: `crd.daemonRssMb.${label}`, value: round(memory.rssMb, 1), unit: 'MB' },
    ];
    return {
      figures,
      details: {
        keys: size.keys,
        sample: sample.length,
        createSeconds: round(created.createMs / 1_000, 1),
        statusSeen: created.firstStatus.filter(Number.isFinite).length,
        firstStatusMs: firstStatus,
        readyMs: spread(created.ready),
        createdToSwapMs: spread(created.toSwap),
        swapToFirstStatusMs: spread(created.swapToStatus),
        generationsSwappedAtSeconds: created.swaps,
        statusWritesPerSecond: created.writesPerSecond,
        phase1Seconds: created.phaseSeconds,
        daemonCpuShare: created.daemonCpuShare,
        apiServerAnswerMs: { statusPatch: created.patchMs, eventCreate: created.eventMs },
        phase1: { ...created.counts, rolls: created.rolls },
        rotateNow: {
          ...rotated.counts,
          rolls: rotated.rolls,
          statusChangesSeenByWatch: rotated.statusChangesSeenByWatch,
        },
        daemonMemoryMb: { rss: round(memory.rssMb, 1), peak: round(memory.peakMb, 1) },
        daemonExitCode: exitCode,
        daemonEvents: Object.fromEntries([...at.daemon.events].sort((a, b) => b[1] - a[1])),
        noticesReceived: [...at.receiver.arrivals.values()].reduce((sum, a) => sum + a.length, 0),
        requestsAtFront: at.front.counts(),
        daemonFailuresTail: at.daemon.tail,
      },
      notes: [
        `crd (daemon): \`keyroll daemon --keys-from kubernetes\` (dist/, the image's flags), ${String(size.keys)} RotatedKeys created while it runs (${String(CONCURRENCY)} in flight, ${String(TEAMS)} namespaces), each with a webhook consumer; firstStatusMs = create call answered → first status seen by the bench's watch (issue 31 sets no number; the floor is the daemon's change debounce, 1 s quiet, at most 5 s after the first change); readyMs the same to Ready=True`,
        `crd (daemon): statusWritesPerRotation = PATCH rotatedkeys/status answered 2xx at a counting front between daemon and API server, from \`${ANNOTATION}: "${ROTATE_NOW}"\` on ${String(sample.length)} keys until the daemon was quiet ${String(QUIET_MS / 1000)} s, over the rolls the emulator served meanwhile (${String(rotated.rolls)}); statusWritesPerFirstRotation the same for the creation phase (${String(created.rolls)} rolls); daemonRssMb = VmRSS once every key was Ready and the daemon quiet`,
      ],
    };
  } finally {
    await at.close();
  }
}
