import { Option, type Command } from 'commander';
import { EXIT_CODES_HELP } from './exit-codes.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit } from './common.ts';

interface StatusFlags {
  policy: string;
  output?: 'table' | 'json';
}

export function registerStatusCommand(program: Command): void {
  const command = program
    .command('status')
    .description('Per key: last rotation, next due, overdue, lock holder, leftover intent, last error. A table on a terminal, JSON with -o json (and when stdout is not a terminal). Exit 1 when a key\'s state cannot be read.')
    .addOption(new Option('-o, --output <format>', 'output format (default: table on a terminal, json otherwise)').choices(['table', 'json']))
    .addHelpText('after', EXIT_CODES_HELP);
  addPolicyOption(command).action(async (flags: StatusFlags) => {
    process.exitCode = await statusCommand(flags);
  });
}

async function statusCommand(flags: StatusFlags): Promise<number> {
  const [{ openBackends, viewKeys }, { renderTable }] = await Promise.all([import('./key-state.ts'), import('./table.ts')]);
  let policy;
  try {
    policy = await loadPolicyOrExit(flags.policy);
  } catch (error) {
    return exitForError(error);
  }
  const backends = await openBackends(policy);
  try {
    const now = new Date();
    const views = await viewKeys(policy, backends, now);
    const rows = views.map((view) => {
      const last = view.state?.lastRotatedAt;
      const byMaxAge = last && view.key.maxAgeMs !== undefined ? new Date(Date.parse(last) + view.key.maxAgeMs) : undefined;
      const next = view.decision?.due ? now : [view.decision?.nextRunAt, byMaxAge].filter((d): d is Date => d !== undefined).sort((a, b) => a.getTime() - b.getTime())[0];
      return {
        keyId: view.key.id,
        organizationId: view.key.organizationId,
        lastRotatedAt: last ?? null,
        lastRotationId: view.state?.lastRotationId ?? null,
        nextDueAt: next?.toISOString() ?? null,
        due: view.decision?.due ?? null,
        overdue: view.decision?.overdue ?? null,
        lock: view.state?.lock && Date.parse(view.state.lock.expiresAt) > now.getTime() ? view.state.lock : null,
        intent: view.state?.intent ?? null,
        // A failure older than the last successful rotation is history, not status.
        lastFailure: view.state?.lastFailure && (!last || view.state.lastFailure.at > last) ? view.state.lastFailure : null,
        ...(view.readError ? { error: view.readError } : {}),
      };
    });
    const output = flags.output ?? (process.stdout.isTTY ? 'table' : 'json');
    if (output === 'json') {
      process.stdout.write(`${JSON.stringify({ policy: policy.file, at: now.toISOString(), keys: rows }, null, 2)}\n`);
    } else {
      process.stdout.write(
        renderTable(
          ['KEY', 'ORG', 'LAST ROTATED', 'NEXT DUE', 'OVERDUE', 'LOCK', 'INTENT', 'LAST ERROR'],
          rows.map((r) => [
            r.keyId,
            r.organizationId,
            r.lastRotatedAt ?? 'never',
            r.error ? '?' : r.due ? 'now' : (r.nextDueAt ?? '-'),
            r.overdue ? 'YES' : 'no',
            r.lock ? `${r.lock.owner} until ${r.lock.expiresAt}` : '-',
            r.intent ? `left by ${r.intent.owner} at ${r.intent.startedAt}` : '-',
            r.error ? `cannot read: ${r.error.errorCode}` : r.lastFailure ? `${r.lastFailure.step} ${r.lastFailure.errorCode} at ${r.lastFailure.at}` : '-',
          ]),
        ),
      );
    }
    return rows.some((r) => r.error) ? 1 : 0;
  } finally {
    await backends.close();
  }
}
