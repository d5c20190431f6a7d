import type { Command } from 'commander';
import { tracedCommand } from './traced-command.ts';
import { EXIT_CODES_HELP } from './exit-codes.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit, parseConcurrency } from './common.ts';
import { addPushgatewayOptions, pushgatewayOptions, type PushgatewayFlags } from './pushgateway-flags.ts';
import { addOutputOptions, type OutputFlags } from './terminal/output-mode.ts';

interface RunFlags extends PushgatewayFlags, OutputFlags {
  policy: string;
  shard?: string;
  concurrency: number;
  pushgateway?: string;
}

export function registerRunCommand(program: Command): void {
  const command = program
    .command('run')
    .description(
      'One pass over the policy: rotate every key that is due (CronJob mode). Prints the audit trail as JSON lines (a per-key progress view when stdout is a terminal; see --log-format) and ends with "rotated N, failed M, skipped K".',
    )
    .option(
      '--shard <i/N>',
      'rotate only the keys of shard i of N (Indexed Jobs); env KEYROLL_SHARD',
      process.env.KEYROLL_SHARD,
    )
    .option('--concurrency <n>', 'keys rotated at once', parseConcurrency, 4)
    .option(
      '--pushgateway <url>',
      'push metrics to this Prometheus Pushgateway when the run ends (a failed push is only a warning); env KEYROLL_PUSHGATEWAY',
      process.env.KEYROLL_PUSHGATEWAY,
    )
    .addHelpText('after', EXIT_CODES_HELP);
  addPushgatewayOptions(command);
  addOutputOptions(command);
  addPolicyOption(command).action(async (flags: RunFlags) => {
    process.exitCode = await tracedCommand('run', () => runCommand(flags));
  });
}

async function runCommand(flags: RunFlags): Promise<number> {
  // The engine's modules load while the policy is read and parsed.
  const modules = Promise.all([import('../policy/public/shard.ts'), import('./execute-run.ts')]);
  const policyLoaded = loadPolicyOrExit(flags.policy);
  const [{ keyInShard, parseShard }, { executeRun }] = await modules;
  let policy;
  let shard;
  let pushgateway;
  try {
    policy = await policyLoaded;
    shard = flags.shard ? parseShard(flags.shard) : undefined;
    pushgateway = flags.pushgateway
      ? (await import('../metrics/public/run-export.ts')).preparePushgateway(
          flags.pushgateway,
          pushgatewayOptions(flags),
        )
      : undefined;
  } catch (error) {
    return exitForError(error);
  }
  return executeRun({
    output: flags,
    policy,
    keys: shard ? policy.keys.filter((key) => keyInShard(key.id, shard)) : policy.keys,
    trigger: { reason: 'scheduled', force: false },
    concurrency: flags.concurrency,
    command: 'run',
    ...(pushgateway ? { pushgateway } : {}),
    groupings: { command: 'run', ...(shard ? { shard: `${shard.index}-of-${shard.total}` } : {}) },
    ...(shard ? { shards: shard.total } : {}),
  });
}
