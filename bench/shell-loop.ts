// Benchmark 3: the shell loop a user would write instead (bench/shell/*.sh: curl the roll, then
// `bao kv put`, or Debian's `aws secretsmanager put-secret-value` against moto) against
// `keyroll rotate --all` on the same 100 keys and the same destination paths, per backend.
// shellSpeedup is the smaller of the two backends' ratios (shell wall / keyroll wall): the claim
// must hold for either.
//
// Both sides are timed from process spawn to exit, on the same servers in the same run. The shell
// loop does less (no lock, intent marker, verification, retry or bookkeeping) and is favoured in
// one more way: the AWS secrets it puts into are created beforehand, untimed. keyroll then rotates
// the same secrets (existing by then, as a user's would be, which costs AWS more requests per
// rotation than a new secret) and creates its lock secrets in the timed run. The emulator (in this process)
// and keyroll allow 6,000 rolls/min, as in the emergency run.
import { spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { CreateSecretCommand, SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import { childEnv, jsonReport, runCli } from './lib/cli.ts';
import type { BenchResult } from './lib/figures.ts';
import { MOTO_ENV, serverBinDir, startMoto, startOpenBao } from './lib/servers.ts';
import { round } from './lib/stats.ts';
import { ORG, OWNER_TOKEN, startWorld } from './lib/world.ts';

const KEYS = 100;
const RATE_PER_MINUTE = 6_000;
const CONCURRENCY = 16;
const SHELL_TIME_LIMIT_MS = 300_000;
const KEYROLL_TIME_LIMIT_MS = 120_000;
const SCRIPTS = {
  vault: fileURLToPath(new URL('./shell/roll-into-openbao.sh', import.meta.url)),
  aws: fileURLToPath(new URL('./shell/roll-into-aws.sh', import.meta.url)),
} as const;

type BackendName = keyof typeof SCRIPTS;

async function runShell(script: string, env: Record<string, string>): Promise<number> {
  const started = performance.now();
  const child = spawn('sh', [script], { env: childEnv(env), stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), SHELL_TIME_LIMIT_MS);
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', resolve);
  });
  clearTimeout(timer);
  if (code !== 0) throw new Error(`${script} exited ${String(code)}:\n${stderr.slice(-2000)}`);
  return performance.now() - started;
}

export async function runShellLoopBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const count = options.quick ? 20 : KEYS;
  const binDir = serverBinDir();
  const [bao, moto] = await Promise.all([startOpenBao(binDir), startMoto(binDir)]);
  const world = await startWorld({ rollRateLimitPerMinute: RATE_PER_MINUTE });
  try {
    const keyIds: Record<BackendName, string[]> = {
      vault: world.addKeys('key_shell_vault_', count),
      aws: world.addKeys('key_shell_aws_', count),
    };
    const aws = new SecretsManagerClient({
      endpoint: moto.url,
      region: MOTO_ENV.AWS_REGION,
      credentials: {
        accessKeyId: MOTO_ENV.AWS_ACCESS_KEY_ID,
        secretAccessKey: MOTO_ENV.AWS_SECRET_ACCESS_KEY,
      },
    });
    try {
      for (const id of keyIds.aws)
        await aws.send(
          new CreateSecretCommand({ Name: `bench/shell/${id}`, Description: 'keyroll bench shell loop' }),
        );
    } finally {
      aws.destroy();
    }
    // One policy per backend, holding exactly the keys the loop rolled, so `rotate --all` is the same 100.
    const policyFor = (backend: BackendName): Promise<string> =>
      world.writePolicy(`${backend}.yaml`, {
        rateLimitPerMinute: RATE_PER_MINUTE,
        backends:
          backend === 'vault'
            ? `  vault: { kind: vault, address: "${bao.url}", mount: secret, auth: { method: token, token: env:VAULT_TOKEN } }`
            : `  aws: { kind: aws, endpoint: "${moto.url}", region: ${MOTO_ENV.AWS_REGION}, createIfMissing: true }`,
        keys: keyIds[backend].map((id) => ({ id, backend, path: `bench/shell/${id}` })),
      });
    const api = { API_URL: world.emulator.url, API_TOKEN: OWNER_TOKEN, ORG };
    const results = {} as Record<
      BackendName,
      { shellMs: number; keyrollMs: number; speedup: number; keyrollRotated: number }
    >;
    for (const backend of ['vault', 'aws'] as const) {
      const shellEnv =
        backend === 'vault'
          ? {
              ...api,
              KEYS: keyIds.vault.join(' '),
              BAO_ADDR: bao.url,
              BAO_TOKEN: bao.rootToken,
              PATH: `${binDir}:${process.env.PATH ?? ''}`,
            }
          : { ...api, ...MOTO_ENV, KEYS: keyIds.aws.join(' '), AWS_ENDPOINT: moto.url, AWS_PAGER: '' };
      const shellMs = await runShell(SCRIPTS[backend], shellEnv);
      const policy = await policyFor(backend);
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
          String(CONCURRENCY),
          '-o',
          'json',
        ],
        {
          cwd: world.dir,
          env: { KEYROLL_API_TOKEN: OWNER_TOKEN, VAULT_TOKEN: bao.rootToken, ...MOTO_ENV },
          timeoutMs: KEYROLL_TIME_LIMIT_MS,
        },
      );
      const report = jsonReport(run.stdout);
      if (report.rotated !== count)
        throw new Error(
          `keyroll rotated ${String(report.rotated)} of ${String(count)} ${backend} keys (exit ${String(run.code)}):\n${run.stderr.slice(-2000)}`,
        );
      results[backend] = {
        shellMs: round(shellMs, 1),
        keyrollMs: round(run.wallMs, 1),
        speedup: round(shellMs / run.wallMs, 2),
        keyrollRotated: report.rotated,
      };
    }
    const shellSpeedup = Math.min(results.vault.speedup, results.aws.speedup);
    return {
      figures: [
        { name: 'shellSpeedup', value: shellSpeedup, unit: '×', goal: { op: '>=', target: 20 } },
        ...(['vault', 'aws'] as const).flatMap((backend) => [
          { name: `shell.${backend}.speedup`, value: results[backend].speedup, unit: '×' },
          { name: `shell.${backend}.shellMs`, value: Math.round(results[backend].shellMs), unit: 'ms' },
          { name: `shell.${backend}.keyrollMs`, value: Math.round(results[backend].keyrollMs), unit: 'ms' },
        ]),
      ],
      details: {
        shellSpeedup,
        keys: count,
        vault: results.vault,
        aws: results.aws,
        keyrollCommand: `node dist/cli/entry.js rotate --all --reason manual --force --concurrency ${String(CONCURRENCY)} (one policy per backend, holding its keys)`,
        shellScripts: { vault: 'bench/shell/roll-into-openbao.sh', aws: 'bench/shell/roll-into-aws.sh' },
        awsCli: '/usr/bin/aws (Debian awscli)',
        rollsPerMinute: RATE_PER_MINUTE,
      },
      notes: [
        `shell loop: ${String(count)} keys per backend, curl + bao / Debian awscli, sequential; keyroll rotate --all --force --concurrency ${String(CONCURRENCY)}; both timed spawn to exit; shellSpeedup = the smaller backend ratio`,
      ],
    };
  } finally {
    await world.close();
    await Promise.all([bao.stop(), moto.stop()]);
  }
}
