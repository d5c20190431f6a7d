// What `status` reports per key (its `-o json` rows) and how a row reads in the table.
import type { FailureRecord, Intent, LockInfo, ProbeRecord, RecordDoubt } from '../backends/public/types.ts';
import { streakCell, type StreakView } from '../rotation/public/failure-streak.ts';
import type { SlotView } from './key-state.ts';
import type { ProbeReport, StandbyVerdict, StoredVerdict } from './probe-keys.ts';
import type { ConsumerStatus } from '../consumers/public/status.ts';
import { terminalLine } from '../audit/public/printable.ts';

export interface StatusRow {
  keyId: string;
  organizationId: string;
  /** Who starts the key's scheduled rotations: keyroll (run, the daemon) or aws-native (Secrets Manager rotation). */
  scheduler: 'keyroll' | 'aws-native';
  lastRotatedAt: string | null;
  lastRotationId: string | null;
  nextDueAt: string | null;
  due: boolean | null;
  overdue: boolean | null;
  lock: LockInfo | null;
  intent: Intent | null;
  lastFailure: FailureRecord | null;
  /** The last probe `run` or the daemon recorded of the stored value now in place (null: none since the last rotation). */
  lastProbe: ProbeRecord | null;
  /** The failure streak in force (backoff, quarantine): why automatic runs hold the key back and since when. */
  failureStreak: StreakView | null;
  /** Records at the primary destination keyroll does not act on as written (malformed, future): corruption or tampering. */
  distrusted: RecordDoubt[];
  /** Two-slot entries only. */
  slots?: SlotView;
  /** `--probe` only: what the probe found now. */
  probe?: ProbeReport;
  /** `--probe` only: the stored secret is dead (the key was rolled outside keyroll). */
  drift?: boolean;
  error?: { errorCode: string; message: string };
  /** Keys that list consumers (unless --no-consumers): each consumer's last refresh, as the cluster holds it. */
  consumers?: ConsumerStatus[];
  /** --keys-from kubernetes: the object of the row, `namespace/name` for a RotatedKey, else `Kind name`. */
  object?: string;
  /** --keys-from kubernetes, a refused object's row: its kind. */
  kind?: string;
  /** --keys-from kubernetes: why keyroll refused the object (a refused key is neither read nor rotated). */
  refused?: { reason: string; message: string };
}

/** One stderr line naming what keyroll distrusts in a key's bookkeeping, never a malformed value. */
export function distrustLine(row: StatusRow): string {
  const doubts = row.distrusted.map(
    (d) =>
      `${d.record}${d.field === undefined ? '' : `.${d.field}`} ${d.problem}${d.value === undefined ? '' : ` (${d.value})`}, ${d.action}`,
  );
  return terminalLine`keyroll: ${row.keyId}: keyroll does not trust part of its bookkeeping: ${doubts.join('; ')}. Corruption, a clock far off, or an edit by someone who may change the destination's tags or metadata: see "Distrusted bookkeeping" in docs/runbook.md\n`;
}

/** The stderr line of a refused object (--keys-from kubernetes): keyroll neither reads nor rotates it, and why. */
export function refusalLine(row: StatusRow): string {
  return terminalLine`keyroll: ${row.object ?? ''} is refused (${row.refused?.reason ?? ''}: ${row.refused?.message ?? ''}); keyroll does not use it until it is changed (docs/crds.md, "Tenancy")\n`;
}

/**
 * Headers and cells of the status table; the SLOTS and PROBE columns only when some row has
 * something to show there, OBJECT first when the rows name their keyroll.io objects.
 */
export function statusCells(
  rows: readonly StatusRow[],
  columns: { withSlots: boolean; withProbe: boolean },
): [string[], string[][]] {
  const withObjects = rows.some((r) => r.object !== undefined);
  const headers = [...(withObjects ? ['OBJECT'] : []), 'KEY', 'ORG', 'LAST ROTATED', 'NEXT DUE', 'OVERDUE'];
  if (columns.withSlots) headers.push('SLOTS');
  if (columns.withProbe) headers.push('PROBE');
  headers.push('LOCK', 'INTENT', 'LAST ERROR');
  const cells = rows.map((r) => {
    const row = [
      ...(withObjects ? [r.object ?? '-'] : []),
      r.keyId === '' ? '-' : r.keyId,
      r.organizationId === '' ? '-' : r.organizationId,
      r.refused ? '-' : (r.lastRotatedAt ?? 'never'),
      r.refused
        ? 'not rotated'
        : r.error
          ? '?'
          : r.scheduler === 'aws-native'
            ? 'AWS schedule (aws-native)'
            : r.due
              ? 'now'
              : (r.nextDueAt ?? '-'),
      r.overdue ? 'YES' : r.refused ? '-' : 'no',
    ];
    if (columns.withSlots) row.push(slotsCell(r));
    if (columns.withProbe) row.push(probeCell(r));
    row.push(
      r.lock ? `${r.lock.owner} until ${r.lock.expiresAt}` : '-',
      r.intent ? `left by ${r.intent.owner} at ${r.intent.startedAt}` : '-',
      r.refused
        ? `REFUSED ${r.refused.reason}: ${r.refused.message}`
        : r.error
          ? `cannot read: ${r.error.errorCode}`
          : (streakCell(r.failureStreak, new Date()) ??
            (r.lastFailure
              ? `${r.lastFailure.step} ${r.lastFailure.errorCode} at ${r.lastFailure.at}`
              : '-')),
    );
    return row;
  });
  return [headers, cells];
}

function slotsCell(r: StatusRow): string {
  const slots = r.slots;
  if (slots === undefined) return '-';
  if (slots.active === null || slots.standby === null) return `${slots.ids.join(', ')} (active unknown)`;
  const free = slots.standbyFreeAt === null ? 'free now' : `free from ${slots.standbyFreeAt}`;
  return `active ${slots.active}; standby ${slots.standby} ${free}, next roll ${slots.standbyNextRollAt ?? '-'}`;
}

const VERDICT_TEXT: Record<StoredVerdict | StandbyVerdict, string> = {
  works: 'works',
  dead: 'DEAD',
  'nothing-stored': 'nothing stored',
  'not-kept': 'no previous value kept',
  'probe-failed': 'probe failed',
};

function probeCell(r: StatusRow): string {
  if (r.probe !== undefined) {
    const failed = r.probe.errorCode === undefined ? '' : ` (${r.probe.errorCode})`;
    if (r.probe.slots === undefined)
      return `${VERDICT_TEXT[r.probe.stored]}${r.drift === true ? ' (drift)' : ''}${failed}`;
    const parts = Object.entries(r.probe.slots).map(([slot, verdict]) => `${slot} ${VERDICT_TEXT[verdict]}`);
    return `${parts.join(', ')}${r.drift === true ? ' (drift)' : ''}${failed}`;
  }
  if (r.lastProbe === null) return '-';
  const who = r.slots?.active ? `${r.slots.active} ` : '';
  return `${who}${VERDICT_TEXT[r.lastProbe.result]} at ${r.lastProbe.at}`;
}

/** The CONSUMERS table: one line per consumer of every key that lists some. */
export function consumerCells(rows: readonly StatusRow[]): [string[], string[][]] {
  const headers = ['KEY', 'CONSUMER', 'STATE', 'LAST REFRESH', 'DETAIL'];
  const cells = rows.flatMap((r) =>
    (r.consumers ?? []).map((c) => [
      r.keyId,
      c.consumer,
      c.state,
      c.lastRefreshAt ?? '-',
      c.errorCode === undefined ? c.detail : `${c.errorCode}: ${c.detail}`,
    ]),
  );
  return [headers, cells];
}
