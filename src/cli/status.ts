import { Option, type Command } from 'commander';
import { EXIT_CODES_HELP } from './exit-codes.ts';
import { addPolicyOption, exitForError, loadPolicyOrExit } from './common.ts';
import { printableJson, terminalLine } from '../audit/public/printable.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import type { ReadOnlyBackends } from './key-state.ts';
import type { ProbeReport, ProbeTarget } from './probe-keys.ts';
import type { StatusRow } from './status-table.ts';
import type { KubeClient } from '../consumers/public/kubernetes/client.ts';
import type { Policy } from '../policy/public/schema.ts';
import { addKeysFromOptions, keysFromOf, type KeysFromFlags } from './keys-from.ts';
import type { ObjectsStatus } from './status-objects.ts';

interface StatusFlags extends KeysFromFlags {
  policy: string;
  output?: 'table' | 'json';
  probe?: boolean;
  /** False with --no-consumers. */
  consumers: boolean;
}

export function registerStatusCommand(program: Command): void {
  const command = program
    .command('status')
    .description(
      "Per key: last rotation, next due, overdue, lock holder, leftover intent, last error (or why and since when the key is quarantined or backing off), the last recorded probe; for a two-slot entry the active slot, the standby and when it may next roll; for a key that lists consumers, each consumer's last refresh as the cluster holds it (synced, restarted, owed, deferred, stale; --no-consumers skips reading them). With --probe, whether each stored secret (and a slot entry's standby) still works. With --keys-from kubernetes, the keys of the keyroll.io objects as the daemon builds them (--policy: its settings file), each row naming its RotatedKey, and each refused object as a row with its reason. A table on a terminal, JSON with -o json (and when stdout is not a terminal). Exit 1 when a key's state cannot be read, and with --probe when a stored secret is dead (drift) or cannot be probed.",
    )
    .addOption(
      new Option(
        '-o, --output <format>',
        'output format (default: table on a terminal, json otherwise)',
      ).choices(['table', 'json']),
    )
    .option(
      '--no-consumers',
      "do not read the keys' consumers from Kubernetes (no CONSUMERS table, no consumers in the JSON)",
    )
    .option(
      '--probe',
      "probe each stored secret against the API (a one-item project list with it; read-only, records nothing); for a slot entry also the standby's previous value when the backend keeps it",
    )
    .addHelpText(
      'after',
      `${EXIT_CODES_HELP}\n  status exits 1 when a key's state cannot be read, and with --probe when a stored secret is dead (drift) or the probe failed.`,
    );
  addKeysFromOptions(command);
  addPolicyOption(command).action(async (flags: StatusFlags) => {
    process.exitCode = await statusCommand(flags);
  });
}

// eslint-disable-next-line max-lines-per-function -- a linear command (load, open backends or probes, one row per key, print, warn, exit code) under one try/finally that closes what it opened
async function statusCommand(flags: StatusFlags): Promise<number> {
  const [
    { openBackends, viewKeys, nextDueAt, slotView },
    { renderTable },
    { statusCells, distrustLine, refusalLine, consumerCells },
    { streakView },
  ] = await Promise.all([
    import('./key-state.ts'),
    import('./table.ts'),
    import('./status-table.ts'),
    import('../rotation/public/failure-streak.ts'),
  ]);
  let policy;
  let objects: ObjectsStatus | undefined;
  try {
    const keysFrom = await keysFromOf(flags);
    if (keysFrom === undefined) policy = await loadPolicyOrExit(flags.policy);
    else {
      // The objects listed once; an API error (403, unreachable) names the request (exit 3).
      const { objectsStatusPolicy } = await import('./status-objects.ts');
      objects = await objectsStatusPolicy(flags.policy, keysFrom);
      policy = objects.policy;
    }
  } catch (error) {
    return exitForError(error);
  }
  let runtime: Runtime | undefined;
  let probe: ((target: ProbeTarget) => Promise<ProbeReport>) | undefined;
  let backends: ReadOnlyBackends;
  try {
    if (flags.probe === true) {
      const [{ createRuntime }, { createNullAuditLog }, { backendsOfRuntime, probeKey, secretProbeOf }] =
        await Promise.all([
          import('../rotation/public/runtime.ts'),
          import('../audit/public/logger.ts'),
          import('./probe-keys.ts'),
        ]);
      // The probes use each stored secret as the bearer; keyroll's own credential is never sent.
      runtime = await createRuntime(policy, { audit: createNullAuditLog() });
      const probeBackends = (backends = backendsOfRuntime(policy, runtime));
      const probeSecret = secretProbeOf(runtime);
      probe = (target) => probeKey(target, probeBackends, probeSecret, new Date());
    } else {
      backends = await openBackends(policy);
    }
  } catch (error) {
    return exitForError(error);
  }
  try {
    const now = new Date();
    const views = await viewKeys(policy, backends, now);
    const rows: StatusRow[] = [];
    for (const view of views) {
      const last = view.state?.lastRotatedAt;
      const slots = slotView(view, now);
      const row: StatusRow = {
        keyId: view.key.id,
        organizationId: view.key.organizationId,
        scheduler: view.key.scheduler ?? 'keyroll',
        lastRotatedAt: last ?? null,
        lastRotationId: view.state?.lastRotationId ?? null,
        nextDueAt: nextDueAt(view.decision, now)?.toISOString() ?? null,
        due: view.decision?.due ?? null,
        overdue: view.decision?.overdue ?? null,
        lock:
          view.state?.lock && Date.parse(view.state.lock.expiresAt) > now.getTime() ? view.state.lock : null,
        intent: view.state?.intent ?? null,
        // A failure (or probe) older than the last successful rotation is history, not status:
        // it was about a value no longer stored.
        lastFailure:
          view.state?.lastFailure && (!last || view.state.lastFailure.at > last)
            ? view.state.lastFailure
            : null,
        lastProbe:
          view.state?.lastProbe && (!last || view.state.lastProbe.at >= last) ? view.state.lastProbe : null,
        failureStreak: view.state ? streakView(view.state) : null,
        distrusted: view.state?.doubts ?? [],
        ...(slots ? { slots } : {}),
        ...(view.readError ? { error: view.readError } : {}),
      };
      if (probe && !view.readError) {
        row.probe = await probe({
          key: view.key,
          active: slots?.active ?? null,
          standby: slots?.standby ?? null,
        });
        row.drift = row.probe.stored === 'dead';
      }
      rows.push(row);
    }
    if (flags.consumers) await addConsumerStatuses(policy, rows);
    // After the consumers: a refused copy of a key shares its id, never its consumers.
    if (objects !== undefined) rows.push(...(await objectRows(rows, objects)));
    const output = flags.output ?? (process.stdout.isTTY ? 'table' : 'json');
    if (output === 'json') {
      process.stdout.write(
        `${printableJson({ policy: policy.file, ...(objects === undefined ? {} : { keysFrom: 'kubernetes' }), at: now.toISOString(), keys: rows }, 2)}\n`,
      );
    } else {
      const withSlots = rows.some((r) => r.slots !== undefined);
      const withProbe = flags.probe === true || rows.some((r) => r.lastProbe !== null);
      process.stdout.write(renderTable(...statusCells(rows, { withSlots, withProbe })));
      if (rows.some((r) => r.consumers !== undefined))
        process.stdout.write(`\n${renderTable(...consumerCells(rows))}`);
    }
    for (const row of rows.filter((r) => r.drift === true)) {
      const dead = row.slots?.active ?? row.keyId;
      process.stderr.write(
        terminalLine`keyroll: drift: the stored secret of ${row.keyId}${row.slots ? ` (active slot ${dead})` : ''} no longer works: the key was rolled outside keyroll and consumers reading it fail. keyroll run heals it (onDrift: rotate), or now: keyroll rotate --key ${dead} --reason manual --force\n`,
      );
    }
    for (const row of rows.filter((r) => r.distrusted.length > 0)) process.stderr.write(distrustLine(row));
    for (const row of rows.filter((r) => r.refused !== undefined)) process.stderr.write(refusalLine(row));
    for (const row of rows.filter((r) => r.probe?.errorCode !== undefined)) {
      process.stderr.write(
        terminalLine`keyroll: ${row.keyId}: probe failed (${row.probe?.errorCode ?? ''}); its stored secret's state is unknown\n`,
      );
    }
    for (const row of rows) {
      for (const consumer of row.consumers?.filter((c) => c.state === 'unreadable') ?? []) {
        process.stderr.write(
          terminalLine`keyroll: ${row.keyId}: consumer ${consumer.consumer} cannot be read (${consumer.errorCode ?? 'unknown'}); its refresh state is unknown\n`,
        );
      }
    }
    return rows.some((r) => r.error !== undefined || r.drift === true || r.probe?.errorCode !== undefined)
      ? 1
      : 0;
  } finally {
    await backends.close();
    await runtime?.close();
  }
}

/** Names each key row's RotatedKey; returns one row per refused object (shown, never dropped). */
async function objectRows(rows: StatusRow[], objects: ObjectsStatus): Promise<StatusRow[]> {
  const { nameObjects, refusalRows } = await import('./status-objects.ts');
  nameObjects(rows, objects);
  return refusalRows(objects);
}

/**
 * Each consumer's last refresh, read from the cluster (src/consumers/status.ts), on the rows of the
 * keys that list consumers. One Kubernetes client for the whole status, made only when some key
 * lists a Kubernetes consumer; a client that cannot be made marks those consumers unreadable.
 */
async function addConsumerStatuses(policy: Policy, rows: StatusRow[]): Promise<void> {
  const withConsumers = policy.keys.filter((key) => (key.consumers ?? []).length > 0);
  if (withConsumers.length === 0) return;
  const [{ consumerStatuses }, { loadKubeConfig, NodeKubeClient }] = await Promise.all([
    import('../consumers/public/status.ts'),
    import('../consumers/public/kubernetes/node-client.ts'),
  ]);
  let client: KubeClient | undefined;
  let clientError: unknown;
  if (withConsumers.some((key) => (key.consumers ?? []).some((consumer) => consumer.kind !== 'webhook'))) {
    try {
      client = new NodeKubeClient(loadKubeConfig(policy.consumers?.kubernetes ?? {}));
    } catch (error) {
      clientError = error;
    }
  }
  await Promise.all(
    rows.map(async (row) => {
      const key = withConsumers.find((candidate) => candidate.id === row.keyId);
      if (key === undefined) return;
      row.consumers = await consumerStatuses(
        key,
        { lastRotatedAt: row.lastRotatedAt ?? undefined, lastRotationId: row.lastRotationId ?? undefined },
        client,
        clientError,
      );
    }),
  );
}
