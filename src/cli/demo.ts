import { rm } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { Command } from 'commander';
import { installedFile } from '../install-files.ts';
import { EXIT_CODES_HELP } from './exit-codes.ts';

interface DemoFlags {
  policy?: string;
  dir: string;
}

export function registerDemoCommand(program: Command): void {
  program
    .command('demo')
    .description('Start the API emulator in-process and rotate the demo policy\'s keys into the file backend (no credentials needed). Shows the audit trail, what happened to each key, and the summary line.')
    // The default is found when demo runs, not here: every command registers this option, and
    // finding the install's config/ walks up the file system.
    .option('-p, --policy <file>', 'demo policy (default: config/demo-policy.yaml of this install)')
    .option('--dir <dir>', 'where the file backend writes (wiped first; demo data only)', '.keyroll-demo')
    .addHelpText('after', EXIT_CODES_HELP)
    .action(async (flags: DemoFlags) => {
      process.exitCode = await demoCommand(flags);
    });
}

async function demoCommand(flags: DemoFlags): Promise<number> {
  const [{ startEmulator }, { createRuntime }, { runRotations }, { staticCredential }, { Secret }, common] = await Promise.all([
    import('../emulator/server.ts'),
    import('../rotation/runtime.ts'),
    import('../rotation/run.ts'),
    import('../api/credentials.ts'),
    import('../audit/secret.ts'),
    import('./common.ts'),
  ]);
  let policy;
  try {
    policy = await common.loadPolicyOrExit(flags.policy ?? installedFile('config/demo-policy.yaml'));
  } catch (error) {
    return common.exitForError(error);
  }
  // Demo data only: every demo starts from an empty directory so the first run rotates every key.
  const directory = resolve(flags.dir, 'secrets');
  await rm(resolve(flags.dir), { recursive: true, force: true });
  const backends = Object.fromEntries(
    Object.entries(policy.backends).map(([name, config]) => [name, config.kind === 'file' ? { ...config, directory } : config]),
  );
  const emulator = await startEmulator({ port: 0 });
  const audit = common.createStdoutAudit();
  const out = (line: string): void => {
    process.stdout.write(`${line}\n`);
  };
  out(`keyroll demo: emulator at ${emulator.url}, file backend at ${directory}`);
  const oldSecrets = new Map(policy.keys.map((key) => [key.id, emulator.state.currentSecret(key.id)]));
  const runtime = await createRuntime({ ...policy, backends }, {
    audit,
    apiBaseUrl: emulator.url,
    // The emulator's seeded owner principal; a demo-only token, not a customer secret.
    credentials: staticCredential(new Secret('demo-owner-token'), 'demo owner token (emulator seed)'),
  });
  try {
    const summary = await runRotations(runtime, { keys: policy.keys, trigger: { reason: 'manual', force: false, actor: 'demo' }, command: 'demo' });
    await audit.flush();
    out('');
    out('What happened:');
    for (const outcome of summary.outcomes) {
      const old = oldSecrets.get(outcome.keyId);
      const oldWorks = old === undefined ? 'n/a' : (await runtime.api.probeSecret(new Secret(old), { organizationId: outcome.organizationId })) === 'valid' ? 'still works' : 'rejected (401)';
      const where = outcome.versions?.map((v) => `${v.backend}:${v.path} v${v.version}`).join(', ') ?? '-';
      out(`  ${outcome.keyId.padEnd(20)} ${outcome.result.padEnd(9)} rolls=${outcome.rolls} stored=${where} exposure=${outcome.exposureMs ?? '-'}ms old secret ${oldWorks}`);
    }
    out(common.summaryLine(summary));
    return summary.exitCode;
  } finally {
    await runtime.close();
    await emulator.close();
  }
}
