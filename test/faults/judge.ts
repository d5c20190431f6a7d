// The verdict on one fault case, the same for in-process and child-process cases: from what the
// case saw (copies of each key after the faulted run and after the next run, every byte keyroll
// wrote, the alerts, the emulator's own records) it computes the four figures, records them on
// the test and asserts the invariants.
import { expect, type TestContext } from 'vitest';
import type { RunningEmulator } from '../../src/emulator/server.ts';
import { findSecrets } from '../support/secret-scan.ts';
import {
  alertsFromAudit,
  checkAlerted,
  checkNoDoubleRoll,
  checkNotLost,
  recordCase,
  reportedRolls,
  type AlertSeen,
  type FaultCase,
  type KeyCopies,
  type RunReport,
} from './record.ts';

export interface KeyEvidence {
  keyId: string;
  /** Whether a copy worked right after the faulted run (judged then: the next run kills old secrets), and whether it left an intent marker. */
  usableAfterFault: boolean;
  intentAfterFault: boolean;
  /** The same after the next run. */
  usableAfterNext: boolean;
  intentAfterNext: boolean;
}

/** Whether some copy of the key is its live secret now, as the API (the emulator) knows it. */
export function isUsable(copies: KeyCopies, emulator: RunningEmulator): boolean {
  return checkNotLost([copies], (keyId, secret) => emulator.state.isLiveSecret(keyId, secret)).lost === 0;
}

export interface CaseEvidence {
  keys: readonly KeyEvidence[];
  /** The runs that reported (a killed process reports nothing). */
  runs: readonly RunReport[];
  /** Every line keyroll wrote on its audit stream (stdout for the CLI). */
  auditLines: readonly string[];
  /** Raw bodies of every alert that reached a receiver. */
  alertBodies: readonly string[];
  /** Anything else keyroll produced: stderr, error messages, summaries, bookkeeping, escrow files. */
  otherOutput: readonly string[];
  emulator: RunningEmulator;
  /**
   * Keys whose rotation died with the process (SIGKILL) and left an intent marker. A dead process
   * cannot alert; the failure becomes visible through the next run's one recovery alert.
   */
  crashed?: readonly string[];
}

export interface CaseVerdict {
  lost: number;
  leaked: number;
  alerted: number;
  failures: number;
  /** Plain sentences for everything that broke an invariant. */
  problems: string[];
  record(
    ctx: Pick<TestContext, 'task'>,
    about: Pick<FaultCase, 'case' | 'fault' | 'backend' | 'step' | 'result'>,
  ): void;
  assertInvariants(): void;
}

function parseRecords(lines: readonly string[]): Record<string, unknown>[] {
  const records: Record<string, unknown>[] = [];
  for (const line of lines.flatMap((chunk) => chunk.split('\n'))) {
    if (!line.startsWith('{')) continue;
    try {
      records.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // Not an audit line.
    }
  }
  return records;
}

function alertsFromBodies(bodies: readonly string[]): AlertSeen[] {
  const seen: AlertSeen[] = [];
  for (const raw of bodies) {
    try {
      const body = JSON.parse(raw) as Record<string, unknown>;
      if (body.event !== 'rotation.failed') continue;
      seen.push({
        ...(typeof body.keyId === 'string' ? { keyId: body.keyId } : {}),
        ...(typeof body.rotationId === 'string' ? { rotationId: body.rotationId } : {}),
        step: String(body.step),
        errorCode: String(body.errorCode),
        severity: String(body.severity),
      });
    } catch {
      // A non-JSON body is not an alert keyroll sent.
    }
  }
  return seen;
}

export function judgeCase(evidence: CaseEvidence): CaseVerdict {
  const problems: string[] = [];
  const records = parseRecords(evidence.auditLines);
  // Not lost: usable after the faulted run, or reported unusable and usable after the next run.
  let lost = 0;
  for (const key of evidence.keys) {
    const { usableAfterFault, usableAfterNext } = key;
    const reported =
      key.intentAfterFault || records.some((r) => r.event === 'key.unusable' && r.keyId === key.keyId);
    if (!usableAfterFault && !reported)
      problems.push(`key ${key.keyId} was left without a working secret and nothing said so`);
    if (!usableAfterNext) problems.push(`key ${key.keyId} has no working secret after the next run`);
    if (key.intentAfterNext) problems.push(`key ${key.keyId} still has an intent marker after the next run`);
    if ((!usableAfterFault && !reported) || !usableAfterNext) lost++;
  }

  // Not leaked: every minted secret, in every form, in everything keyroll wrote.
  const haystacks = [...evidence.auditLines, ...evidence.alertBodies, ...evidence.otherOutput];
  const leaks = findSecrets(haystacks, evidence.emulator.state.mintedSecrets());
  for (const hit of leaks.hits)
    problems.push(`secret ${hit.fingerprint} leaked (${hit.form}) in output #${hit.haystack}`);

  // Alerted: one alert per failure, none for a success; delivered or audited as undeliverable.
  const seen = [...alertsFromAudit(records), ...alertsFromBodies(evidence.alertBodies)];
  const alerts = checkAlerted(evidence.runs, seen);
  problems.push(...alerts.problems);
  for (const keyId of evidence.crashed ?? []) {
    alerts.failures++;
    const recoveries = new Set(
      seen
        .filter((alert) => alert.keyId === keyId && alert.step === 'recovery')
        .map((alert) => alert.rotationId),
    );
    if (recoveries.size === 1) alerts.alerted++;
    else
      problems.push(
        `key ${keyId} died mid-rotation and the next run raised ${recoveries.size} recovery alerts`,
      );
  }

  // Every key event names its key (and so can be told apart in a run of thousands).
  const anonymous = [
    ...new Set(
      records
        .filter(
          (r) => typeof r.event === 'string' && r.event.startsWith('key.') && typeof r.keyId !== 'string',
        )
        .map((r) => String(r.event)),
    ),
  ];
  if (anonymous.length > 0) problems.push(`audit events without a keyId: ${anonymous.join(', ')}`);

  // No double roll: the API applied exactly the rolls keyroll accounts for.
  const rolls = checkNoDoubleRoll(
    evidence.keys.map((key) => ({
      keyId: key.keyId,
      emulatorRolls: evidence.emulator.state.rollCount(key.keyId),
      reportedRolls: reportedRolls(records, key.keyId),
    })),
  );
  problems.push(...rolls.problems);

  return {
    lost,
    leaked: leaks.leaked,
    alerted: alerts.alerted,
    failures: alerts.failures,
    problems,
    record: (ctx, about) => {
      recordCase(ctx, {
        ...about,
        lost,
        leaked: leaks.leaked,
        alerted: alerts.alerted,
        failures: alerts.failures,
      });
    },
    assertInvariants: () => {
      expect(problems, 'invariant problems').toEqual([]);
      expect(lost, 'lost').toBe(0);
      expect(leaks.leaked, 'leaked').toBe(0);
      expect(alerts.alerted, 'alerted').toBe(alerts.failures);
      expect(rolls.mismatched, 'double rolls').toBe(0);
    },
  };
}
