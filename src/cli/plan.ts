import { Option, type Command } from 'commander';
import { EXIT_CODES_HELP } from './exit-codes.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit } from './common.ts';
import type { SlotView } from './key-state.ts';
import { printableJson } from '../audit/public/printable.ts';

interface PlanFlags {
  policy: string;
  output: 'text' | 'json';
  shard?: string;
}

export function registerPlanCommand(program: Command): void {
  const command = program
    .command('plan')
    .description(
      'Dry run: which keys are due and why (schedule, max age, intent left behind), which are held back (failure backoff, quarantine) and since when, the next run of each schedule, for a two-slot entry the active slot, the standby a rotation would roll and when it may, and what would be written where. Reads backend bookkeeping only; changes nothing, rolls nothing.',
    )
    .option('--shard <i/N>', 'only the keys of shard i of N', process.env.KEYROLL_SHARD)
    .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
    .addHelpText('after', EXIT_CODES_HELP);
  addPolicyOption(command).action(async (flags: PlanFlags) => {
    process.exitCode = await planCommand(flags);
  });
}

// eslint-disable-next-line max-lines-per-function -- a linear command (load, read each key's state, print the plan, exit code), read top to bottom
async function planCommand(flags: PlanFlags): Promise<number> {
  const [
    { openBackends, viewKeys, slotView },
    { renderTable },
    { keyInShard, parseShard },
    { streakCell, streakView },
    { describeEmergency, estimateEmergency },
  ] = await Promise.all([
    import('./key-state.ts'),
    import('./table.ts'),
    import('../policy/public/shard.ts'),
    import('../rotation/public/failure-streak.ts'),
    import('../rotation/public/emergency-estimate.ts'),
  ]);
  let policy;
  let shard;
  try {
    policy = await loadPolicyOrExit(flags.policy);
    shard = flags.shard ? parseShard(flags.shard) : undefined;
  } catch (error) {
    return exitForError(error);
  }
  const backends = await openBackends(policy);
  try {
    const now = new Date();
    const keys = shard ? policy.keys.filter((key) => keyInShard(key.id, shard)) : policy.keys;
    const views = await viewKeys(policy, backends, now, keys);
    const describe = (d: { backend: string; target: { path: string; shape: { format: string } } }): string =>
      `${d.backend}:${d.target.path} (${d.target.shape.format})`;
    const plan = views.map((view) => ({
      keyId: view.key.id,
      organizationId: view.key.organizationId,
      due: view.decision?.due ?? null,
      reasons: view.decision?.reasons ?? [],
      lastRotatedAt: view.state?.lastRotatedAt ?? null,
      nextRunAt: view.decision?.nextRunAt?.toISOString() ?? null,
      notBefore: view.decision?.notBefore?.toISOString() ?? null,
      schedule: view.key.schedule ?? null,
      // One scheduler per secret: an aws-native key is started by Secrets Manager, never by run or the daemon.
      scheduler: view.key.scheduler ?? 'keyroll',
      maxAgeMs: view.key.maxAgeMs ?? null,
      writes: view.key.destinations.map(describe),
      fallbacks: view.key.fallbacks.map(describe),
      // A key in backoff or quarantine is held back by `run` even when due: why, and since when.
      failureStreak: view.state ? streakView(view.state) : null,
      // Two-slot entries: the active slot, the standby a scheduled rotation would roll, and when it may.
      ...(view.key.slots ? { slots: slotView(view, now) } : {}),
      ...(view.readError ? { error: view.readError } : {}),
    }));
    // Invariant 11: what an emergency over these keys costs in time, and which quota bounds it.
    const emergency = estimateEmergency(policy, keys, {
      ...(shard ? { shards: shard.total } : {}),
      env: process.env,
    });
    if (flags.output === 'json') {
      process.stdout.write(
        `${printableJson({ policy: policy.file, at: now.toISOString(), keys: plan, emergency }, 2)}\n`,
      );
    } else {
      // The SLOTS column only when the policy has a two-slot entry: single-key tables read as before.
      const withSlots = plan.some((p) => p.slots !== undefined);
      process.stdout.write(
        renderTable(
          ['KEY', 'ORG', 'DUE', 'WHY', 'NEXT SCHEDULED', ...(withSlots ? ['SLOTS'] : []), 'WOULD WRITE'],
          plan.map((p) => [
            p.keyId,
            p.organizationId,
            p.error
              ? 'unknown'
              : p.scheduler === 'aws-native'
                ? 'by AWS'
                : streakCell(p.failureStreak, now) !== undefined
                  ? 'held'
                  : p.due
                    ? 'yes'
                    : 'no',
            p.error
              ? `cannot read state: ${p.error.errorCode}`
              : p.scheduler === 'aws-native'
                ? 'scheduler aws-native: Secrets Manager rotation starts it, run and the daemon skip it'
                : (streakCell(p.failureStreak, now) ?? (p.reasons.join(', ') || '-')),
            p.nextRunAt ?? '-',
            ...(withSlots ? [planSlotsCell(p.slots)] : []),
            [...p.writes, ...p.fallbacks.map((f) => `fallback ${f}`)].join('; '),
          ]),
        ),
      );
      const due = plan.filter(
        (p) => p.due && p.scheduler === 'keyroll' && streakCell(p.failureStreak, now) === undefined,
      ).length;
      process.stdout.write(`${describeEmergency(emergency)}\n`);
      process.stdout.write(`${due} of ${plan.length} keys due; nothing was changed\n`);
    }
    return plan.some((p) => p.error) ? 1 : 0;
  } finally {
    await backends.close();
  }
}

function planSlotsCell(slots: SlotView | undefined): string {
  if (slots === undefined) return '-';
  if (slots.active === null || slots.standby === null) return `${slots.ids.join(', ')} (active unknown)`;
  const free = slots.standbyFreeAt === null ? 'free now' : `free from ${slots.standbyFreeAt}`;
  return `active ${slots.active}; would roll ${slots.standby}, ${free}, next roll ${slots.standbyNextRollAt ?? '-'}`;
}
