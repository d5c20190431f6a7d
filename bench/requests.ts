// Requests per rotation: `keyroll rotate --all --force` over 20 keys into OpenBao and into moto,
// through a counting proxy (bench/lib/request-counter.ts). Not a speed figure: the count of
// backend round trips is what the shell-loop ratio mostly pays for, and it does not move with
// the machine's load, so it shows whether a change removed work or only moved it.
import { jsonReport, runCli } from './lib/cli.ts';
import type { BenchResult } from './lib/figures.ts';
import { startRequestCounter } from './lib/request-counter.ts';
import { MOTO_ENV, serverBinDir, startMoto, startOpenBao } from './lib/servers.ts';
import { round } from './lib/stats.ts';
import { OWNER_TOKEN, startWorld } from './lib/world.ts';

const KEYS = 20;

export async function runRequestsBench(): Promise<BenchResult> {
  const binDir = serverBinDir();
  const [bao, moto] = await Promise.all([startOpenBao(binDir), startMoto(binDir)]);
  const world = await startWorld({ rollRateLimitPerMinute: 6_000 });
  const perBackend: Record<string, { perRotation: number; byKind: Record<string, number> }> = {};
  try {
    for (const backend of ['vault', 'aws'] as const) {
      const counter = await startRequestCounter(backend === 'vault' ? bao.url : moto.url);
      try {
        const ids = world.addKeys(`key_requests_${backend}_`, KEYS);
        const policy = await world.writePolicy(`requests-${backend}.yaml`, {
          rateLimitPerMinute: 6_000,
          backends:
            backend === 'vault'
              ? `  vault: { kind: vault, address: "${counter.url}", mount: secret, auth: { method: token, token: env:VAULT_TOKEN } }`
              : `  aws: { kind: aws, endpoint: "${counter.url}", region: ${MOTO_ENV.AWS_REGION}, createIfMissing: true }`,
          keys: ids.map((id) => ({ id, backend, path: `bench/requests/${id}` })),
        });
        const run = await runCli(
          [
            'rotate',
            '--all',
            '--reason',
            'manual',
            '--force',
            '--policy',
            policy,
            '--concurrency',
            '4',
            '-o',
            'json',
          ],
          {
            cwd: world.dir,
            env: { KEYROLL_API_TOKEN: OWNER_TOKEN, VAULT_TOKEN: bao.rootToken, ...MOTO_ENV },
            timeoutMs: 120_000,
          },
        );
        const report = jsonReport(run.stdout);
        if (report.rotated !== KEYS)
          throw new Error(
            `keyroll rotated ${String(report.rotated)} of ${String(KEYS)} ${backend} keys (exit ${String(run.code)}):\n${run.stderr.slice(-2000)}`,
          );
        const byKind = Object.fromEntries(
          Object.entries(counter.counts()).map(([kind, n]) => [kind, round(n / KEYS, 2)]),
        );
        perBackend[backend] = { perRotation: round(counter.total() / KEYS, 2), byKind };
      } finally {
        await counter.close();
      }
    }
  } finally {
    await world.close();
    await Promise.all([bao.stop(), moto.stop()]);
  }
  return {
    figures: [
      { name: 'requests.vault.perRotation', value: perBackend.vault?.perRotation ?? Number.NaN, unit: '' },
      { name: 'requests.aws.perRotation', value: perBackend.aws?.perRotation ?? Number.NaN, unit: '' },
    ],
    details: { keys: KEYS, ...perBackend },
    notes: [
      `requests: backend requests per rotation (rotate --all --force over ${String(KEYS)} new keys, through a counting proxy); the shell loop makes 1`,
    ],
  };
}
