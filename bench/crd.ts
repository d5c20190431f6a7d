// `npm run bench -- crd` (issue 31): keys as objects at scale, on the real kube-apiserver the
// tests start, with the keyroll.io CRDs applied.
//   - crd.watchSyncMs.{1k,10k}: a fresh process's list of every RotatedKey (pages of 500), from
//     its first request to every object held (printed);
//   - crd.watchRssMb.{0,1k,10k} and crd.watchHeapMb.*: that process's RSS and used JS heap once it
//     holds them, after a full GC (printed: the issue asks for the watch's memory at 1,000 and
//     10,000 objects; 0 is the process alone, whose RSS is mostly the code it loaded);
//   - crd.objectsToPolicyMs.1k: building the policy a daemon generation runs from 1,000 watched
//     RotatedKeys with their ClusterKeyApi and ClusterKeyStore (the work each change costs).
// The objects are spread over 10 team namespaces, each key with one destination and a consumer,
// as a platform's teams would write them.
// Then, on a fresh API server, the daemon's figures (bench/crd-daemon.ts): a real `keyroll daemon
// --keys-from kubernetes` with 1,000 RotatedKeys created while it runs: crd.firstStatusMs,
// crd.statusWritesPerRotation (goal <= 2) and crd.daemonRssMb.1k.
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Agent } from 'undici';
import { KeyrollObject } from '../src/crd/kinds/kinds.ts';
import { objectsToPolicy } from '../src/crd/policy/objects-to-policy.ts';
import { adminAgent, createObject, installKeyrollCrds } from '../test/support/keyroll-crds.ts';
import type { KubeApiServerInfo, RunningKubeApiServer } from '../test/support/kube-apiserver.ts';
import { createTempDir } from '../test/support/temp-dir.ts';
import { runCrdDaemonBench } from './crd-daemon.ts';
import type { WatchSample } from './crd-watch-child.ts';
import { startBenchKube } from './lib/kube-apiserver.ts';
import type { BenchResult } from './lib/figures.ts';
import { percentile, round } from './lib/stats.ts';

const CHILD = fileURLToPath(new URL('./crd-watch-child.ts', import.meta.url));
const TEAMS = 10;
const GROUP_PATH = '/apis/keyroll.io/v1alpha1';
/** Creations in flight at once: enough to keep the API server busy without a 429 storm. */
const CONCURRENCY = 16;

const team = (index: number): string => `team-${String(index % TEAMS)}`;

function rotatedKey(index: number): Record<string, unknown> {
  const namespace = team(index);
  const name = `key-${String(index).padStart(5, '0')}`;
  return {
    apiVersion: 'keyroll.io/v1alpha1',
    kind: 'RotatedKey',
    metadata: { namespace, name },
    spec: {
      id: `key_bench_${String(index)}`,
      organization: 'org_bench',
      apiRef: { name: 'acme' },
      destinations: [{ storeRef: { kind: 'ClusterKeyStore', name: 'vault' }, path: `${namespace}/${name}` }],
      maxAge: '30d',
      consumers: [{ kind: 'deployment', name: `app-${String(index)}` }],
    },
  };
}

const SHARED: Record<string, unknown>[] = [
  {
    apiVersion: 'keyroll.io/v1alpha1',
    kind: 'ClusterKeyApi',
    metadata: { name: 'acme' },
    spec: {
      baseUrl: 'https://api.example.com',
      credential: { type: 'bearer', token: 'env:ACME_TOKEN' },
      conditions: [{ namespaceSelector: {}, organizations: ['org_bench'] }],
    },
  },
  {
    apiVersion: 'keyroll.io/v1alpha1',
    kind: 'ClusterKeyStore',
    metadata: { name: 'vault' },
    spec: {
      kind: 'vault',
      address: 'https://vault.example.com:8200',
      auth: { method: 'kubernetes', role: 'keyroll' },
      conditions: [{ namespaceSelector: {}, pathPrefix: '{namespace}/' }],
    },
  },
];

/** Creates RotatedKeys [from, to) with CONCURRENCY requests in flight. */
async function createKeys(kube: RunningKubeApiServer, agent: Agent, from: number, to: number): Promise<void> {
  let next = from;
  const worker = async (): Promise<void> => {
    while (next < to) {
      const index = next++;
      await createObject(
        kube,
        agent,
        `${GROUP_PATH}/namespaces/${team(index)}/rotatedkeys`,
        rotatedKey(index),
      );
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

async function watchOnce(infoFile: string): Promise<WatchSample> {
  const child = spawn(process.execPath, ['--expose-gc', CHILD, infoFile], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`crd-watch-child exited ${String(code)}`);
  return JSON.parse(out.trim().split('\n').pop() ?? '{}') as WatchSample;
}

/** The median of `runs` fresh watching processes (the first of a series pays the API server's cold caches). */
async function watchSample(infoFile: string, runs: number): Promise<WatchSample> {
  const samples: WatchSample[] = [];
  for (let run = 0; run < runs; run++) samples.push(await watchOnce(infoFile));
  const median = (pick: (s: WatchSample) => number): number => percentile(samples.map(pick), 50);
  return {
    objects: samples[0]?.objects ?? 0,
    syncMs: median((s) => s.syncMs),
    rssMb: median((s) => s.rssMb),
    heapUsedMb: median((s) => s.heapUsedMb),
  };
}

function policyTime(count: number, runs: number): number {
  const objects = [...SHARED, ...Array.from({ length: count }, (_, index) => rotatedKey(index))].map((o) =>
    KeyrollObject.parse({
      ...o,
      metadata: { ...(o.metadata as object), creationTimestamp: '2026-01-01T00:00:00Z' },
    }),
  );
  const namespaces = new Map(Array.from({ length: TEAMS }, (_, index) => [team(index), {}]));
  const times: number[] = [];
  for (let run = 0; run < runs; run++) {
    const started = performance.now();
    const built = objectsToPolicy(objects, { keyrollNamespace: 'keyroll', namespaces });
    times.push(performance.now() - started);
    if (built.keys.size !== count)
      throw new Error(`objectsToPolicy kept ${String(built.keys.size)} of ${String(count)} keys`);
  }
  return percentile(times, 50);
}

async function runWatchBench(options: { quick?: boolean }): Promise<BenchResult> {
  const sizes = options.quick ? [100, 1_000] : [1_000, 10_000];
  const runs = options.quick ? 1 : 3;
  const dir = await createTempDir('keyroll-bench-crd-');
  const kube = await startBenchKube();
  const agent = adminAgent(kube);
  try {
    await installKeyrollCrds(kube);
    for (let index = 0; index < TEAMS; index++)
      await createObject(kube, agent, '/api/v1/namespaces', { metadata: { name: team(index) } });
    for (const object of SHARED) {
      const plural = object.kind === 'ClusterKeyApi' ? 'clusterkeyapis' : 'clusterkeystores';
      await createObject(kube, agent, `${GROUP_PATH}/${plural}`, object);
    }
    const infoFile = join(dir.path, 'kube.json');
    const info: KubeApiServerInfo = {
      server: kube.server,
      caPem: kube.caPem,
      admin: kube.admin,
      serviceAccountIssuer: kube.serviceAccountIssuer,
    };
    await writeFile(infoFile, JSON.stringify(info), { mode: 0o600 });

    const empty = await watchSample(infoFile, runs);
    const samples: WatchSample[] = [];
    let created = 0;
    const createdMs: number[] = [];
    for (const size of sizes) {
      const started = performance.now();
      await createKeys(kube, agent, created, size);
      createdMs.push(performance.now() - started);
      created = size;
      samples.push(await watchSample(infoFile, runs));
    }
    const policyMs = policyTime(1_000, options.quick ? 3 : 9);
    const label = (size: number): string => (size >= 1_000 ? `${String(size / 1_000)}k` : String(size));
    return {
      figures: [
        ...samples.map((s, i) => ({
          name: `crd.watchSyncMs.${label(sizes[i] ?? 0)}`,
          value: s.syncMs,
          unit: 'ms',
        })),
        { name: 'crd.watchRssMb.0', value: empty.rssMb, unit: 'MB' },
        ...samples.map((s, i) => ({
          name: `crd.watchRssMb.${label(sizes[i] ?? 0)}`,
          value: s.rssMb,
          unit: 'MB',
        })),
        { name: 'crd.watchHeapMb.0', value: empty.heapUsedMb, unit: 'MB' },
        ...samples.map((s, i) => ({
          name: `crd.watchHeapMb.${label(sizes[i] ?? 0)}`,
          value: s.heapUsedMb,
          unit: 'MB',
        })),
        { name: 'crd.objectsToPolicyMs.1k', value: round(policyMs, 1), unit: 'ms' },
      ],
      details: {
        sizes,
        runsPerSample: runs,
        empty,
        samples,
        createSeconds: createdMs.map((ms) => round(ms / 1_000, 1)),
        objectsToPolicyMs: round(policyMs, 1),
      },
      notes: [
        `crd: RotatedKeys in ${String(TEAMS)} namespaces on a real kube-apiserver (etcd on this machine); each figure is the median of ${String(runs)} fresh watching processes (node --expose-gc, RSS after a full GC once the list is held)`,
      ],
    };
  } finally {
    await agent.close();
    await kube.stop();
    await dir.remove();
  }
}

/** The watch's figures on one API server, then the daemon's (bench/crd-daemon.ts) on a fresh one. */
export async function runCrdBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const watched = await runWatchBench(options);
  const daemon = await runCrdDaemonBench(options);
  return {
    figures: [...watched.figures, ...daemon.figures],
    details: { ...watched.details, daemon: daemon.details },
    notes: [...(watched.notes ?? []), ...(daemon.notes ?? [])],
  };
}
