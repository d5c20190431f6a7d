import { lstat, mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { installedFile } from '../install-files.ts';
import { EMULATOR_IN_BUILD, EMULATOR_LEFT_OUT_MESSAGE } from './build-features.ts';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';
import type { Policy } from '../policy/public/schema.ts';
import { addOutputOptions, type OutputFlags } from './terminal/output-mode.ts';
import type { RunOutput } from './terminal/run-output.ts';

/**
 * The file that marks a directory keyroll demo made. The demo wipes its directory before each
 * run; without the mark, `--dir ~` (or any typo) would delete whatever was there.
 */
export const DEMO_DIR_MARKER = '.keyroll-demo-dir';

interface DemoFlags extends OutputFlags {
  policy?: string;
  dir: string;
}

export function registerDemoCommand(program: Command): void {
  const command = program
    .command('demo')
    .description(
      "Start the API emulator in-process and rotate the demo policy's keys into the file backend (no credentials needed). Shows each key's progress (the audit trail as JSON lines when stdout is not a terminal, or with --log-format), what happened to each key, and the summary line.",
    )
    // The default is found when demo runs, not here: every command registers this option, and
    // finding the install's config/ walks up the file system.
    .option('-p, --policy <file>', 'demo policy (default: config/demo-policy.yaml of this install)')
    .option(
      '--dir <dir>',
      'where the file backend writes: a new or empty directory, or one an earlier demo made (wiped first; demo data only)',
      '.keyroll-demo',
    )
    .addHelpText('after', EXIT_CODES_HELP)
    .action(async (flags: DemoFlags) => {
      process.exitCode = await demoCommand(flags);
    });
  addOutputOptions(command);
}

async function demoCommand(flags: DemoFlags): Promise<number> {
  if (!EMULATOR_IN_BUILD) {
    process.stderr.write(`keyroll demo ${EMULATOR_LEFT_OUT_MESSAGE}\n`);
    return ExitCode.config;
  }
  const modules = await loadDemoModules();
  const { common } = modules;
  let policy;
  let output;
  try {
    policy = await common.loadPolicyOrExit(flags.policy ?? installedFile('config/demo-policy.yaml'));
    // Before the directory is wiped: an --audit-file that cannot be opened exits 2 first.
    output = await modules.openRunOutput(
      flags,
      policy.keys.map((key) => key.id),
    );
  } catch (error) {
    return common.exitForError(error);
  }
  try {
    return await demoRun(modules, policy, output, flags);
  } finally {
    output.close();
  }
}

async function loadDemoModules() {
  const [
    { startEmulator },
    { createRuntime },
    { runRotations },
    { staticCredential },
    { Secret },
    common,
    { openRunOutput },
  ] = await Promise.all([
    import('../emulator/public/server.ts'),
    import('../rotation/public/runtime.ts'),
    import('../rotation/public/run.ts'),
    import('../api/public/credentials.ts'),
    import('../audit/public/secret.ts'),
    import('./common.ts'),
    import('./terminal/run-output.ts'),
  ]);
  return { startEmulator, createRuntime, runRotations, staticCredential, Secret, common, openRunOutput };
}

async function demoRun(
  modules: Awaited<ReturnType<typeof loadDemoModules>>,
  policy: Policy,
  output: RunOutput,
  flags: DemoFlags,
): Promise<number> {
  const { startEmulator, createRuntime, runRotations, staticCredential, Secret, common } = modules;
  // Demo data only: every demo starts from an empty directory so the first run rotates every key.
  const directory = resolve(flags.dir, 'secrets');
  const refusal = await prepareDemoDir(resolve(flags.dir));
  if (refusal !== undefined) {
    process.stderr.write(`keyroll demo: --dir ${flags.dir} ${refusal}\n`);
    return ExitCode.config;
  }
  const backends = Object.fromEntries(
    Object.entries(policy.backends).map(([name, config]) => [
      name,
      config.kind === 'file' ? { ...config, directory } : config,
    ]),
  );
  const emulator = await startEmulator({ port: 0 });
  const { audit } = output;
  const out = (line: string): void => {
    process.stdout.write(`${line}\n`);
  };
  out(`keyroll demo: emulator at ${emulator.url}, file backend at ${directory}`);
  // A slot entry's id names the entry, not an API key: its two slots are the keys it rolls.
  const oldSecrets = new Map(
    policy.keys.flatMap((key) => key.slots ?? [key.id]).map((id) => [id, emulator.state.currentSecret(id)]),
  );
  const runtime = await createRuntime(
    { ...policy, backends },
    {
      audit,
      apiBaseUrl: emulator.url,
      // The emulator's seeded owner principal; a demo-only token, not a customer secret.
      credentials: staticCredential(new Secret('demo-owner-token'), 'demo owner token (emulator seed)'),
    },
  );
  try {
    const summary = await runRotations(runtime, {
      keys: policy.keys,
      trigger: { reason: 'manual', force: false, actor: 'demo' },
      command: 'demo',
      onKeyDone: (outcome) => {
        output.keyDone(outcome);
      },
    });
    await audit.flush();
    output.finishView();
    out('');
    out('What happened:');
    const oldSecretState = async (apiKeyId: string, organizationId: string): Promise<string> => {
      const old = oldSecrets.get(apiKeyId);
      if (old === undefined) return 'n/a';
      return (await runtime.api.probeSecret(new Secret(old), { organizationId })) === 'valid'
        ? 'still works'
        : 'rejected (401)';
    };
    for (const outcome of summary.outcomes) {
      const slots = policy.keys.find((key) => key.id === outcome.keyId)?.slots;
      // A slot entry shows both slots: the rolled one's old secret is dead, the other's still works (consumers are safe).
      const oldWorks =
        slots === undefined
          ? `old secret ${await oldSecretState(outcome.keyId, outcome.organizationId)}`
          : `old secrets: ${(await Promise.all(slots.map(async (slot) => `${slot} ${await oldSecretState(slot, outcome.organizationId)}`))).join(', ')}`;
      const where = outcome.versions?.map((v) => `${v.backend}:${v.path} v${v.version}`).join(', ') ?? '-';
      out(
        `  ${outcome.keyId.padEnd(20)} ${outcome.result.padEnd(9)} rolls=${outcome.rolls} stored=${where} exposure=${outcome.exposureMs ?? '-'}ms ${oldWorks}`,
      );
    }
    out(common.summaryLine(summary));
    return summary.exitCode;
  } finally {
    output.finishView();
    await runtime.close();
    await emulator.close();
  }
}

/**
 * Makes `dir` an empty demo directory: a new one, an empty one, or one an earlier demo marked
 * (wiped). Anything else is left as it is and the reason returned.
 */
export async function prepareDemoDir(dir: string): Promise<string | undefined> {
  let isDirectory: boolean;
  try {
    // lstat: a symbolic link is not followed to whatever it points at.
    isDirectory = (await lstat(dir)).isDirectory();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT')
      return `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
    await mkdir(dir, { recursive: true });
    await markDemoDir(dir);
    return undefined;
  }
  if (!isDirectory) return 'is not a directory; give a new or empty directory';
  const entries = await readdir(dir);
  if (entries.length > 0 && !entries.includes(DEMO_DIR_MARKER)) {
    return `is not empty and was not made by keyroll demo (it has no ${DEMO_DIR_MARKER}); the demo wipes its directory, so give a new or empty one`;
  }
  for (const entry of entries) await rm(join(dir, entry), { recursive: true, force: true });
  await markDemoDir(dir);
  return undefined;
}

async function markDemoDir(dir: string): Promise<void> {
  await writeFile(
    join(dir, DEMO_DIR_MARKER),
    'Made by keyroll demo: the next `keyroll demo --dir` here deletes everything in this directory.\n',
    { mode: 0o600 },
  );
}
