// What a scanner delivery that asks for work passes: a place in the queue, the durable replay
// record, and one job per alert and action within the window.
import { rm, writeFile } from 'node:fs/promises';
import { beforeEach, describe, expect, it } from 'vitest';
import { FileReplayRecord } from '../../src/inbound/replay-record.ts';
import { IntakeGate, type DeliveryToAdmit } from '../../src/leaks/intake-gate.ts';
import { useTempDir } from '../support/temp-dir.ts';

const NOW = new Date('2030-03-01T00:00:00Z');
const HOUR = 3_600_000;
const dir = useTempDir('keyroll-intake-gate-');
let replay: FileReplayRecord;

beforeEach(async () => {
  replay = await FileReplayRecord.open(dir.path(), 'replay-github.jsonl', NOW.getTime() / 1000);
});

const delivery = (id: string, alert: string, now = NOW): DeliveryToAdmit => ({
  replay,
  id,
  expiresAt: now.getTime() / 1000 + 3600,
  alert,
  now,
});

describe('IntakeGate', () => {
  it('admits a delivery once; its replay is refused; another delivery for the same alert and action is a duplicate until the window ends', async () => {
    const gate = new IntakeGate(() => undefined, { alertWindowMs: HOUR });
    expect((await gate.admit(delivery('digest-1', 'octo/app#1:created'))).kind).toBe('admitted');
    expect(await gate.admit(delivery('digest-1', 'octo/app#1:created'))).toEqual({
      kind: 'refused',
      why: 'replay',
    });
    expect(await gate.admit(delivery('digest-2', 'octo/app#1:created'))).toEqual({ kind: 'duplicate-alert' });
    expect((await gate.admit(delivery('digest-3', 'octo/app#1:reopened'))).kind).toBe('admitted');
    const later = new Date(NOW.getTime() + HOUR);
    expect((await gate.admit(delivery('digest-4', 'octo/app#1:created', later))).kind).toBe('admitted');
  });

  it('refuses intake-busy when the queue is full, without spending the delivery', async () => {
    const gate = new IntakeGate(() => undefined, { queueCapacity: 1 });
    const first = await gate.admit(delivery('digest-1', 'octo/app#1:created'));
    expect(await gate.admit(delivery('digest-2', 'octo/app#2:created'))).toEqual({
      kind: 'refused',
      why: 'intake-busy',
    });
    if (first.kind === 'admitted') first.place.release();
    expect((await gate.admit(delivery('digest-2', 'octo/app#2:created'))).kind).toBe('admitted');
  });

  it('a delivery that cannot be recorded is refused and leaves its alert free for the retry', async () => {
    const gate = new IntakeGate(() => undefined);
    await rm(dir.path(), { recursive: true });
    await writeFile(dir.path(), 'not a directory');
    expect(await gate.admit(delivery('digest-1', 'octo/app#1:created'))).toEqual({
      kind: 'refused',
      why: 'replay-record-unavailable',
    });
    await rm(dir.path());
    replay = await FileReplayRecord.open(dir.path(), 'replay-github.jsonl', NOW.getTime() / 1000);
    expect((await gate.admit(delivery('digest-1', 'octo/app#1:created'))).kind).toBe('admitted');
    expect(gate.queued).toBe(1);
  });

  it('audits an ignored delivery the first time within the window only', () => {
    const gate = new IntakeGate(() => undefined, { alertWindowMs: HOUR });
    expect(gate.firstIgnored('digest-1', NOW)).toBe(true);
    expect(gate.firstIgnored('digest-1', NOW)).toBe(false);
    expect(gate.firstIgnored('digest-1', new Date(NOW.getTime() + HOUR))).toBe(true);
  });

  describe('shared with the GitHub reconcile', () => {
    const withRef = (id: string, ref: string, action = 'created'): DeliveryToAdmit => ({
      ...delivery(id, `${ref}:${action}`),
      ref,
    });
    /** Every job that can start now has started. */
    const settled = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
    /** Runs the admitted job until `finish` is called. */
    const hold = (place: { run(job: () => Promise<void>): void }): (() => void) => {
      let finish = (): void => undefined;
      place.run(() => new Promise<void>((resolve) => (finish = resolve)));
      return () => {
        finish();
      };
    };

    it('a delivery for an alert the reconcile is handling is a duplicate, whatever its action', async () => {
      const gate = new IntakeGate(() => undefined, { alertWindowMs: HOUR });
      const reconciled = gate.admitReconciled('octo/app#1', NOW);
      if (reconciled.kind !== 'admitted') throw new Error('the reconcile was not admitted');
      const finish = hold(reconciled.place);
      expect(await gate.admit(withRef('digest-1', 'octo/app#1'))).toEqual({ kind: 'duplicate-alert' });
      expect(await gate.admit(withRef('digest-2', 'octo/app#1', 'publicly_leaked'))).toEqual({
        kind: 'duplicate-alert',
      });
      // Another alert is not held up.
      expect((await gate.admit(withRef('digest-3', 'octo/app#2'))).kind).toBe('admitted');
      finish();
    });

    it('the reconcile skips an alert whose delivery job runs, and one handled within the window', async () => {
      const background: Promise<void>[] = [];
      const gate = new IntakeGate((work) => background.push(work), { alertWindowMs: HOUR });
      const admitted = await gate.admit(withRef('digest-1', 'octo/app#1'));
      if (admitted.kind !== 'admitted') throw new Error('the delivery was not admitted');
      const finish = hold(admitted.place);
      expect(gate.admitReconciled('octo/app#1', NOW)).toEqual({ kind: 'skipped', why: 'in-flight' });
      finish();
      await Promise.all(background);
      expect(gate.admitReconciled('octo/app#1', NOW)).toEqual({
        kind: 'skipped',
        why: 'handled-within-window',
      });
      expect(gate.admitReconciled('octo/app#1', new Date(NOW.getTime() + HOUR)).kind).toBe('admitted');
    });

    // Issue 30, the ha bench's slowest deliveries: a new leader's reconcile took two of its four
    // runners for alerts another replica was handling, and the deliveries behind them waited.
    it('a delivery never waits behind the reconcile: its runners are its own', async () => {
      const background: Promise<void>[] = [];
      const gate = new IntakeGate((work) => background.push(work), { concurrency: 2 });
      const started: string[] = [];
      const holds: (() => void)[] = [];
      const run = (place: { run(job: () => Promise<void>): void }, name: string): void => {
        place.run(
          () =>
            new Promise<void>((resolve) => {
              started.push(name);
              holds.push(resolve);
            }),
        );
      };
      for (const ref of ['octo/app#1']) {
        const reconciled = gate.admitReconciled(ref, NOW);
        if (reconciled.kind !== 'admitted') throw new Error('the reconcile was not admitted');
        run(reconciled.place, ref);
      }
      for (const ref of ['octo/app#2', 'octo/app#3']) {
        const admitted = await gate.admit(withRef(`digest-${ref}`, ref));
        if (admitted.kind !== 'admitted') throw new Error('the delivery was not admitted');
        run(admitted.place, ref);
      }
      await settled();
      expect(started).toEqual(['octo/app#1', 'octo/app#2', 'octo/app#3']);
      // The reconcile's own share stays bounded: a second reconciled alert waits for the first.
      const second = gate.admitReconciled('octo/app#4', NOW);
      if (second.kind !== 'admitted') throw new Error('the reconcile was not admitted');
      run(second.place, 'octo/app#4');
      await settled();
      expect(started).toHaveLength(3);
      holds[0]?.();
      await settled();
      expect(started).toEqual(['octo/app#1', 'octo/app#2', 'octo/app#3', 'octo/app#4']);
      for (const hold of holds) hold();
      await Promise.all(background);
      expect(gate.queued).toBe(0);
    });

    it('the reconcile takes no place of a full queue and tries the alert again next time', () => {
      const gate = new IntakeGate(() => undefined, { queueCapacity: 1, alertWindowMs: HOUR });
      const first = gate.admitReconciled('octo/app#1', NOW);
      expect(gate.admitReconciled('octo/app#2', NOW)).toEqual({ kind: 'skipped', why: 'intake-busy' });
      if (first.kind === 'admitted') first.place.release();
      expect(gate.admitReconciled('octo/app#2', NOW).kind).toBe('admitted');
    });
  });
});
