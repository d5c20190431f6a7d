// What a scanner delivery that asks for work passes: a place in the queue, the durable replay
// record, and one job per alert and action within the window.
import { rm, writeFile } from 'node:fs/promises';
import { beforeEach, describe, expect, it } from 'vitest';
import { ReplayRecord } from '../../src/inbound/replay-record.ts';
import { IntakeGate, type DeliveryToAdmit } from '../../src/leaks/intake-gate.ts';
import { useTempDir } from '../support/temp-dir.ts';

const NOW = new Date('2030-03-01T00:00:00Z');
const HOUR = 3_600_000;
const dir = useTempDir('keyroll-intake-gate-');
let replay: ReplayRecord;

beforeEach(async () => {
  replay = await ReplayRecord.open(dir.path(), 'replay-github.jsonl', NOW.getTime() / 1000);
});

const delivery = (id: string, alert: string, now = NOW): DeliveryToAdmit => ({ replay, id, expiresAt: now.getTime() / 1000 + 3600, alert, now });

describe('IntakeGate', () => {
  it('admits a delivery once; its replay is refused; another delivery for the same alert and action is a duplicate until the window ends', async () => {
    const gate = new IntakeGate(() => undefined, { alertWindowMs: HOUR });
    expect((await gate.admit(delivery('digest-1', 'octo/app#1:created'))).kind).toBe('admitted');
    expect(await gate.admit(delivery('digest-1', 'octo/app#1:created'))).toEqual({ kind: 'refused', why: 'replay' });
    expect(await gate.admit(delivery('digest-2', 'octo/app#1:created'))).toEqual({ kind: 'duplicate-alert' });
    expect((await gate.admit(delivery('digest-3', 'octo/app#1:reopened'))).kind).toBe('admitted');
    const later = new Date(NOW.getTime() + HOUR);
    expect((await gate.admit(delivery('digest-4', 'octo/app#1:created', later))).kind).toBe('admitted');
  });

  it('refuses intake-busy when the queue is full, without spending the delivery', async () => {
    const gate = new IntakeGate(() => undefined, { queueCapacity: 1 });
    const first = await gate.admit(delivery('digest-1', 'octo/app#1:created'));
    expect(await gate.admit(delivery('digest-2', 'octo/app#2:created'))).toEqual({ kind: 'refused', why: 'intake-busy' });
    if (first.kind === 'admitted') first.place.release();
    expect((await gate.admit(delivery('digest-2', 'octo/app#2:created'))).kind).toBe('admitted');
  });

  it('a delivery that cannot be recorded is refused and leaves its alert free for the retry', async () => {
    const gate = new IntakeGate(() => undefined);
    await rm(dir.path(), { recursive: true });
    await writeFile(dir.path(), 'not a directory');
    expect(await gate.admit(delivery('digest-1', 'octo/app#1:created'))).toEqual({ kind: 'refused', why: 'replay-record-unavailable' });
    await rm(dir.path());
    replay = await ReplayRecord.open(dir.path(), 'replay-github.jsonl', NOW.getTime() / 1000);
    expect((await gate.admit(delivery('digest-1', 'octo/app#1:created'))).kind).toBe('admitted');
    expect(gate.queued).toBe(1);
  });

  it('audits an ignored delivery the first time within the window only', () => {
    const gate = new IntakeGate(() => undefined, { alertWindowMs: HOUR });
    expect(gate.firstIgnored('digest-1', NOW)).toBe(true);
    expect(gate.firstIgnored('digest-1', NOW)).toBe(false);
    expect(gate.firstIgnored('digest-1', new Date(NOW.getTime() + HOUR))).toBe(true);
  });
});
