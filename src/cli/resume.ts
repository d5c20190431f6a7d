// `keyroll resume --key ID --actor NAME`: a person fixed what kept a key failing and lets keyroll
// try it again. Ends the key's failure streak (quarantine or backoff) at its primary destination,
// under the key lock, audited with the actor; the next run attempts the key at once. Rolls nothing.
import { primaryDestination } from '../policy/public/schema.ts';
import { randomUUID } from 'node:crypto';
import { terminalLine } from '../audit/public/printable.ts';
import { hostname, userInfo } from 'node:os';
import type { Command } from 'commander';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';
import { addPolicyOption, createStdoutAudit, exitForError, loadPolicyOrExit } from './common.ts';
import { UsageError } from '../errors.ts';

interface ResumeFlags {
  policy: string;
  key: string;
  actor?: string;
  ticket?: string;
}

export function registerResumeCommand(program: Command): void {
  const command = program
    .command('resume')
    .description(
      "Lift a key's quarantine (or cut its failure backoff short) once the cause is fixed: the next run attempts the key at once. Takes the key lock, ends the failure streak recorded at the primary destination, and audits key.resumed with the actor (JSON on stdout). Rolls nothing.",
    )
    .requiredOption('-k, --key <id>', 'the key (or slot entry, or one of its slots)')
    .option(
      '--actor <name>',
      'who lifts it (recorded in the audit trail); env KEYROLL_ACTOR, else the OS user',
      process.env.KEYROLL_ACTOR,
    )
    .option('--ticket <id>', 'incident or change ticket (recorded in the audit trail)')
    .addHelpText(
      'after',
      `
Example:
  keyroll resume --key key_billing --actor alice --ticket INC-1234
${EXIT_CODES_HELP}
  resume exits 0 when the streak was ended or there was none, 3 when another runner holds the key lock.`,
    );
  addPolicyOption(command).action(async (flags: ResumeFlags) => {
    process.exitCode = await resumeCommand(flags);
  });
}

async function resumeCommand(flags: ResumeFlags): Promise<number> {
  const [{ findKeyEntry }, { openBackends }, { resumeKey }] = await Promise.all([
    import('../policy/public/key-entry.ts'),
    import('./key-state.ts'),
    import('../rotation/public/quarantine.ts'),
  ]);
  let policy;
  let entry;
  try {
    policy = await loadPolicyOrExit(flags.policy);
    entry = findKeyEntry(policy, flags.key);
    if (entry === undefined) throw new UsageError(`no key or slot entry ${flags.key} in ${policy.file}`);
  } catch (error) {
    return exitForError(error);
  }
  const { key } = entry;
  const destination = primaryDestination(key);
  const actor = flags.actor ?? safeUserName();
  const audit = createStdoutAudit().child({
    actor,
    reason: 'resume',
    ...(flags.ticket ? { ticket: flags.ticket } : {}),
  });
  let backends;
  try {
    backends = await openBackends(policy);
  } catch (error) {
    return exitForError(error);
  }
  try {
    const primary = {
      backendName: destination.backend,
      backend: backends.get(destination.backend),
      target: destination.target,
    };
    const deps = {
      owner: `${hostname()}/${String(process.pid)}/resume`,
      now: () => new Date(),
      newRotationId: () => randomUUID(),
    };
    const result = await resumeKey(key, primary, deps, audit, actor);
    if (result.kind === 'busy') {
      process.stderr.write(
        terminalLine`keyroll: the lock of ${key.id} is held by ${result.holder.owner} until ${result.holder.expiresAt}; nothing was changed, try again once it is released\n`,
      );
      return ExitCode.aborted;
    }
    if (result.kind === 'no-streak') {
      process.stderr.write(`keyroll: ${key.id} is neither quarantined nor backing off; nothing to resume\n`);
      return ExitCode.ok;
    }
    const { streak } = result;
    const what =
      streak.quarantinedAt === undefined
        ? 'backoff ended'
        : `quarantine (since ${streak.quarantinedAt}) lifted`;
    process.stderr.write(
      terminalLine`keyroll: ${key.id}: ${what} after ${String(streak.consecutive)} consecutive failures (last ${streak.last.step} ${streak.last.errorCode}); the next run attempts it\n`,
    );
    return ExitCode.ok;
  } catch (error) {
    return exitForError(error);
  } finally {
    await backends.close();
  }
}

function safeUserName(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
