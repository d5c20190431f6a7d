import { Option, type Command } from 'commander';
import { userInfo } from 'node:os';
import { sanitizeText } from '../audit/public/sanitize.ts';
import { isLeakReason, type RotationReason } from '../rotation/public/types.ts';
import { EXIT_CODES_HELP } from './exit-codes.ts';
import { tracedCommand } from './traced-command.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit, parseConcurrency } from './common.ts';
import { UsageError } from '../errors.ts';
import { addPushgatewayOptions, pushgatewayOptions, type PushgatewayFlags } from './pushgateway-flags.ts';
import { addOutputOptions, type OutputFlags } from './terminal/output-mode.ts';

interface RotateFlags extends PushgatewayFlags, OutputFlags {
  policy: string;
  key?: string[];
  org?: string;
  all?: boolean;
  reason: Exclude<RotationReason, 'scheduled' | 'recovery'>;
  actor?: string;
  ticket?: string;
  force?: boolean;
  concurrency: number;
  output: 'text' | 'json';
  pushgateway?: string;
  leakedSecretStdin?: boolean;
}

const collect = (value: string, previous: string[] = []): string[] => [...previous, value];

export function registerRotateCommand(program: Command): void {
  const command = program
    .command('rotate')
    .description(
      'Rotate now, ignoring schedules: after a leak, a compromise or a plan change. --reason leak|compromise (or --force) also bypasses the minimum interval. Actor, reason and ticket go on every audit event.',
    )
    .option('-k, --key <id>', 'a key to rotate (repeatable; rotated in the order given)', collect)
    .option('--org <id>', 'every key of this organization')
    .option('--all', 'every key in the policy')
    .addOption(
      new Option('--reason <reason>', 'why')
        .choices(['leak', 'compromise', 'plan-change', 'manual'])
        .default('manual'),
    )
    .option('--actor <name>', 'who asked (recorded in the audit trail)', process.env.KEYROLL_ACTOR)
    .option('--ticket <id>', 'incident or change ticket (recorded in the audit trail)')
    .option('--force', 'bypass the minimum interval for reasons other than leak/compromise')
    .option(
      '--leaked-secret-stdin',
      'instead of --key/--org/--all: read a leaked value on standard input (never an argument or the environment), find the entry that holds it as keyroll identify does, rotate it (a two-slot entry: the slot it belongs to), then prove the leaked value dead (401). --reason defaults to leak; exit 4 when no entry holds it',
    )
    .option('--concurrency <n>', 'keys rotated at once', parseConcurrency, 4)
    .addOption(
      new Option('-o, --output <format>', "final report format (the audit trail is --log-format's)")
        .choices(['text', 'json'])
        .default('text'),
    )
    .option(
      '--pushgateway <url>',
      'push metrics to this Prometheus Pushgateway when the run ends (a failed push is only a warning); env KEYROLL_PUSHGATEWAY',
      process.env.KEYROLL_PUSHGATEWAY,
    )
    .addHelpText(
      'after',
      `
Examples:
  keyroll rotate --key key_billing --reason leak --actor alice --ticket INC-1234
  keyroll rotate --org org_acme --reason compromise --actor oncall
  pbpaste | keyroll rotate --leaked-secret-stdin --reason leak --actor alice --ticket INC-1234
${EXIT_CODES_HELP}`,
    );
  addPushgatewayOptions(command);
  addOutputOptions(command);
  addPolicyOption(command).action(async (flags: RotateFlags, self: Command) => {
    process.exitCode = await tracedCommand('rotate', () =>
      rotateCommand(flags, self.getOptionValueSource('reason') === 'cli'),
    );
  });
}

// eslint-disable-next-line max-lines-per-function -- a linear command (check flags, select keys, run them, exit code), read top to bottom
async function rotateCommand(flags: RotateFlags, reasonGiven: boolean): Promise<number> {
  // The engine's modules load while the policy is read and parsed.
  const modules = Promise.all([import('./select-keys.ts'), import('./execute-run.ts')]);
  const policyLoaded = loadPolicyOrExit(flags.policy);
  const [{ namedSlots, selectKeys }, { executeRun }] = await modules;
  let keys;
  let slots;
  let policy;
  let pushgateway;
  let leak;
  try {
    if (flags.leakedSecretStdin === true) flags.reason = leakReason(flags, reasonGiven);
    policy = await policyLoaded;
    pushgateway = flags.pushgateway
      ? (await import('../metrics/public/run-export.ts')).preparePushgateway(
          flags.pushgateway,
          pushgatewayOptions(flags),
        )
      : undefined;
    if (flags.leakedSecretStdin === true) {
      const [{ readLeakedSecret }, { identifyForRotation }] = await Promise.all([
        import('./leaked-stdin.ts'),
        import('./leak-rotate.ts'),
      ]);
      const context = {
        reason: flags.reason,
        actor: flags.actor ?? safeUserName(),
        ...(flags.ticket ? { ticket: flags.ticket } : {}),
      };
      leak = await identifyForRotation(policy, await readLeakedSecret(), context, flags);
      if (typeof leak === 'number') return leak;
      keys = leak.keys;
      slots = leak.slots;
    } else {
      keys = selectKeys(policy, {
        ...(flags.key ? { keys: flags.key } : {}),
        ...(flags.org ? { org: flags.org } : {}),
        ...(flags.all ? { all: true } : {}),
      });
      slots = namedSlots(policy, flags.key ?? []);
    }
  } catch (error) {
    return exitForError(error);
  }
  const leakRotation = leak;
  const urgent = isLeakReason(flags.reason);
  return executeRun({
    output: flags,
    policy,
    keys,
    trigger: {
      reason: flags.reason,
      force: urgent || flags.force === true,
      ignoreSchedule: true,
      actor: flags.actor ?? safeUserName(),
      ...(flags.ticket ? { ticket: flags.ticket } : {}),
    },
    concurrency: flags.concurrency,
    command: 'rotate',
    ...(slots.size > 0 ? { slots } : {}),
    ...(pushgateway ? { pushgateway } : {}),
    groupings: { command: 'rotate' },
    ...(leakRotation ? { onStart: leakRotation.announce, afterRotations: leakRotation.prove } : {}),
    ...(flags.output === 'json'
      ? {
          report: (summary, consumers) =>
            sanitizeText(
              JSON.stringify({
                runId: summary.runId,
                rotated: summary.rotated,
                failed: summary.failed,
                skipped: summary.skipped,
                exitCode: summary.exitCode,
                aborted: summary.aborted,
                keys: summary.outcomes,
                ...(consumers === undefined ? {} : { consumers }),
                ...(leakRotation ? { leak: leakRotation.json() } : {}),
              }),
            ),
        }
      : leakRotation
        ? { report: () => sanitizeText(leakRotation.textLines().join('\n')) }
        : {}),
  });
}

/** --leaked-secret-stdin rotates with reason leak unless --reason compromise was given; any other reason is refused. */
function leakReason(flags: RotateFlags, reasonGiven: boolean): RotateFlags['reason'] {
  if (flags.key !== undefined || flags.org !== undefined || flags.all === true) {
    throw new UsageError('--leaked-secret-stdin finds the key itself: leave out --key, --org and --all');
  }
  if (!reasonGiven) return 'leak';
  if (isLeakReason(flags.reason)) return flags.reason;
  throw new UsageError(
    `--leaked-secret-stdin rotates a leaked value: --reason must be leak or compromise, not ${flags.reason}`,
  );
}

function safeUserName(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
