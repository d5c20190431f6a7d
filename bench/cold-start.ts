// Benchmark 4: cold start, from process start (the bench's spawn) to the first roll request on
// the wire (the emulator's HTTP server receiving its headers), median of 11 runs. Printed, not a
// goal (issue 14: a CronJob loses nothing to a slower start); it keeps the cost visible. The headline is
// the bundled dist/ (`node <ENTRYPOINT flags> dist/cli/entry.js`, as the Docker image runs it) with a file
// destination; the TypeScript sources and the OpenBao and AWS (moto) destinations are reported
// beside it. Everything before the roll counts: module loading, the policy, the credential check,
// preflight, lock and intent marker. Runs of the variants are interleaved, so a noisy moment on
// the machine does not land on one variant only.
import diagnosticsChannel from 'node:diagnostics_channel';
import type { IncomingMessage } from 'node:http';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { runCli, type Entry } from './lib/cli.ts';
import type { BenchResult, Figure } from './lib/figures.ts';
import { MOTO_ENV, startMoto, startOpenBao } from './lib/servers.ts';
import { median, round } from './lib/stats.ts';
import { OWNER_TOKEN, startWorld } from './lib/world.ts';

const RUNS = 11;
const TIME_LIMIT_PER_RUN_MS = 60_000;

interface Variant {
  name: string;
  entry: Entry;
  backend: 'file' | 'vault' | 'aws';
}

const VARIANTS: Variant[] = [
  { name: 'dist.file', entry: 'dist', backend: 'file' },
  { name: 'src.file', entry: 'src', backend: 'file' },
  { name: 'dist.vault', entry: 'dist', backend: 'vault' },
  { name: 'dist.aws', entry: 'dist', backend: 'aws' },
];

export async function runColdStartBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const runs = options.quick ? 3 : RUNS;
  const [bao, moto] = await Promise.all([startOpenBao(), startMoto()]);
  const world = await startWorld({ rollRateLimitPerMinute: 1_000_000 });
  // The first roll request each run sends, as the emulator's HTTP server sees it arrive.
  let firstRollAt: number | undefined;
  const onRequest = (message: unknown): void => {
    const { request } = message as { request: IncomingMessage };
    if (firstRollAt === undefined && request.url?.includes('/roll') === true) firstRollAt = performance.now();
  };
  // Read through a function: set by the callback, which TypeScript cannot see from the loop.
  const rollSeenAt = (): number | undefined => firstRollAt;
  diagnosticsChannel.subscribe('http.server.request.start', onRequest);
  try {
    const backends = {
      file: `  files: { kind: file, directory: ${join(world.dir, 'secrets')} }`,
      vault: `  vault: { kind: vault, address: "${bao.url}", mount: secret, auth: { method: token, token: env:VAULT_TOKEN } }`,
      aws: `  aws: { kind: aws, endpoint: "${moto.url}", region: ${MOTO_ENV.AWS_REGION}, createIfMissing: true }`,
    };
    const policies = new Map<Variant['backend'], string>();
    for (const backend of ['file', 'vault', 'aws'] as const) {
      const [id] = world.addKeys(`key_cold_${backend}_`, 1);
      const instance = backend === 'file' ? 'files' : backend;
      policies.set(
        backend,
        await world.writePolicy(`${backend}.yaml`, {
          rateLimitPerMinute: 600,
          backends: backends[backend],
          keys: [{ id: id ?? '', backend: instance, path: `bench/cold/${backend}.json` }],
        }),
      );
    }
    const samples = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
    const totals = new Map<string, number[]>(VARIANTS.map((v) => [v.name, []]));
    // One untimed run per variant first: the first ever run pays for the OS file cache.
    for (let pass = -1; pass < runs; pass++) {
      for (const variant of VARIANTS) {
        firstRollAt = undefined;
        const run = await runCli(
          [
            'rotate',
            '--all',
            '--reason',
            'leak',
            '--actor',
            'bench',
            '--policy',
            policies.get(variant.backend) ?? '',
          ],
          {
            cwd: world.dir,
            entry: variant.entry,
            env: { KEYROLL_API_TOKEN: OWNER_TOKEN, VAULT_TOKEN: bao.rootToken, ...MOTO_ENV },
            timeoutMs: TIME_LIMIT_PER_RUN_MS,
          },
        );
        const rollAt = rollSeenAt();
        if (run.code !== 0 || rollAt === undefined)
          throw new Error(
            `cold start ${variant.name}: exit ${String(run.code)}, roll seen: ${String(rollAt !== undefined)}\n${run.stderr.slice(-2000)}`,
          );
        if (pass >= 0) {
          samples.get(variant.name)?.push(rollAt - run.spawnedAt);
          totals.get(variant.name)?.push(run.wallMs);
        }
      }
    }
    const perVariant = Object.fromEntries(
      VARIANTS.map((v) => {
        const s = samples.get(v.name) ?? [];
        return [
          v.name,
          {
            medianMs: round1(median(s)),
            minMs: round1(Math.min(...s)),
            maxMs: round1(Math.max(...s)),
            wholeRunMedianMs: round1(median(totals.get(v.name) ?? [])),
            runs: s.length,
          },
        ];
      }),
    ) as Record<
      string,
      { medianMs: number; minMs: number; maxMs: number; wholeRunMedianMs: number; runs: number }
    >;
    const coldStartMs = perVariant['dist.file']?.medianMs ?? NaN;
    const figures: Figure[] = [
      { name: 'coldStartMs', value: coldStartMs, unit: 'ms' },
      ...VARIANTS.filter((v) => v.name !== 'dist.file').map((v) => ({
        name: `coldStart.${v.name}.medianMs`,
        value: perVariant[v.name]?.medianMs ?? NaN,
        unit: 'ms',
      })),
    ];
    return {
      figures,
      details: {
        coldStartMs,
        runs,
        variants: perVariant,
        measured:
          'spawn of `node <entry> rotate --all --reason leak` (one key) to the emulator receiving the roll request',
      },
      notes: [
        `cold start: median of ${String(runs)} runs per variant, spawn → first roll request received; coldStartMs = the bundled dist/ with the image's node flags, file destination`,
      ],
    };
  } finally {
    diagnosticsChannel.unsubscribe('http.server.request.start', onRequest);
    await world.close();
    await Promise.all([bao.stop(), moto.stop()]);
  }
}

function round1(value: number): number {
  return round(value, 1);
}
