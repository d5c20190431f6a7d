// `keyroll resume --key ID --actor NAME`: a person fixed what kept a key failing and lets keyroll
// try it again. Ends the key's failure streak (quarantine or backoff) at its primary destination,
// under the key lock, audited with the actor; the next run attempts the key at once. Rolls nothing.
// With --keys-from kubernetes (issue 31) the key is one of the keyroll.io objects, named by its id
// or its RotatedKey's `namespace/name`, found as `keyroll status --keys-from kubernetes` finds it:
// the objects listed once and built into a policy by the daemon's own function. A refused object
// has no key to resume; the error says why it was refused.
import { primaryDestination } from '../policy/public/schema.ts';
import { randomUUID } from 'node:crypto';
import { terminalLine } from '../audit/public/printable.ts';
import { hostname, userInfo } from 'node:os';
import type { Command } from 'commander';
import { EXIT_CODES_HELP, ExitCode } from './exit-codes.ts';
import { addPolicyOption, createStdoutAudit, exitForError, loadPolicyOrExit } from './common.ts';
import { UsageError } from '../errors.ts';
import { refName, type Refusal } from '../crd/public/policy/refusal.ts';
import type { WatchedObject } from '../crd/public/watch/resource.ts';
import type { Policy } from '../policy/public/schema.ts';
import { addKeysFromOptions, keysFromOf, type KeysFromFlags } from './keys-from.ts';

interface ResumeFlags extends KeysFromFlags {
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
    .requiredOption(
      '-k, --key <id>',
      "the key (or slot entry, or one of its slots); with --keys-from kubernetes also its RotatedKey's namespace/name",
    )
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
  keyroll resume --keys-from kubernetes -p settings.yaml --key billing/billing-api --actor alice
${EXIT_CODES_HELP}
  resume exits 0 when the streak was ended or there was none, 3 when another runner holds the key lock.`,
    );
  addKeysFromOptions(addPolicyOption(command)).action(async (flags: ResumeFlags) => {
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
    const keysFrom = await keysFromOf(flags);
    if (keysFrom === undefined) {
      policy = await loadPolicyOrExit(flags.policy);
      entry = findKeyEntry(policy, flags.key);
      if (entry === undefined) throw new UsageError(`no key or slot entry ${flags.key} in ${policy.file}`);
    } else {
      const { objectsStatusPolicy } = await import('./status-objects.ts');
      const objects = await objectsStatusPolicy(flags.policy, keysFrom);
      policy = objects.policy;
      entry = findKeyEntry(policy, objects.keyOf.get(flags.key) ?? flags.key);
      if (entry === undefined) throw new UsageError(notAmongObjects(flags.key, objects));
    }
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

/** Why --key names no key of the objects: refused (with the reason), or named by no RotatedKey. */
function notAmongObjects(
  wanted: string,
  objects: { policy: Policy; refusals: readonly Refusal[]; rotatedKeys: ReadonlyMap<string, WatchedObject> },
): string {
  const refused = objects.refusals.find((refusal) => {
    if (refusal.object.kind !== 'RotatedKey') return false;
    const object = refName(refusal.object);
    const spec = objects.rotatedKeys.get(object)?.spec as { id?: unknown } | undefined;
    return object === wanted || spec?.id === wanted;
  });
  if (refused !== undefined)
    return `${wanted}: RotatedKey ${refName(refused.object)} is refused (${refused.reason}: ${refused.message}); keyroll rotates nothing of it, so there is nothing to resume`;
  return `no RotatedKey ${wanted} (namespace/name) and no key or slot entry of that id among the keyroll.io objects keyroll rotates`;
}

function safeUserName(): string {
  try {
    return userInfo().username;
  } catch {
    return 'unknown';
  }
}
