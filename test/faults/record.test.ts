// The checkers every fault case relies on must themselves catch what they claim to catch (the
// leak scan's own tests: test/support/secret-scan.test.ts).
import { describe, expect, it } from 'vitest';
import { checkAlerted, checkNoDoubleRoll, checkNotLost, reportedRolls, type AlertSeen } from './record.ts';
import { faultTable, faultTotals, summaryLine, type FaultRow } from './reporter.ts';

describe('checkNotLost', () => {
  const isLive = (keyId: string, secret: string): boolean => keyId === 'k1' && secret === 'live';

  it('accepts a key with one live copy among dead ones', () => {
    expect(checkNotLost([{ keyId: 'k1', secrets: ['dead', undefined, 'live'] }], isLive)).toEqual({
      lost: 0,
      lostKeys: [],
    });
  });

  it('counts a key whose copies are all dead or missing', () => {
    expect(checkNotLost([{ keyId: 'k1', secrets: ['dead', undefined] }], isLive)).toEqual({
      lost: 1,
      lostKeys: ['k1'],
    });
  });
});

describe('checkAlerted', () => {
  const alert = (overrides: Partial<AlertSeen>): AlertSeen => ({
    keyId: 'k1',
    rotationId: 'r1',
    step: 'store',
    errorCode: 'KR_X',
    severity: 'critical',
    ...overrides,
  });

  it('counts a failure with one alert, repeats of the same alert counting once', () => {
    const run = { runId: 'run1', outcomes: [{ keyId: 'k1', result: 'failed', rotationId: 'r1' }] };
    expect(checkAlerted([run], [alert({}), alert({})])).toEqual({ alerted: 1, failures: 1, problems: [] });
  });

  it('flags a failure with no alert and one with two different alerts', () => {
    const run = {
      runId: 'run1',
      outcomes: [
        { keyId: 'k1', result: 'failed', rotationId: 'r1' },
        { keyId: 'k2', result: 'failed', rotationId: 'r2' },
      ],
    };
    const result = checkAlerted(
      [run],
      [alert({ keyId: 'k2', rotationId: 'r2' }), alert({ keyId: 'k2', rotationId: 'r2', severity: 'error' })],
    );
    expect(result).toMatchObject({ alerted: 0, failures: 2 });
    expect(result.problems).toHaveLength(2);
  });

  it('flags an alert for a success but allows the recovery warning', () => {
    const run = { runId: 'run1', outcomes: [{ keyId: 'k1', result: 'rotated', rotationId: 'r1' }] };
    expect(checkAlerted([run], [alert({ step: 'recovery', severity: 'warning' })]).problems).toEqual([]);
    expect(checkAlerted([run], [alert({})]).problems).toHaveLength(1);
  });

  it('expects one run alert for an aborted run', () => {
    const run = { runId: 'run1', outcomes: [], aborted: { reason: 'shutdown' } };
    const runAlert: AlertSeen = {
      rotationId: 'run1',
      step: 'run',
      errorCode: 'KR_RUN_SHUTDOWN',
      severity: 'warning',
    };
    expect(checkAlerted([run], [runAlert])).toEqual({ alerted: 1, failures: 1, problems: [] });
  });
});

describe('checkNoDoubleRoll', () => {
  it('counts received rolls and unanswered rolls found applied', () => {
    const records = [
      { event: 'key.probe', keyId: 'k1', step: 'roll', verdict: 'rolled-and-lost' },
      { event: 'key.probe', keyId: 'k1', step: 'recovery', verdict: 'stored-secret-dead' },
      { event: 'key.rolled', keyId: 'k1' },
      { event: 'key.rolled', keyId: 'k2' },
    ];
    expect(reportedRolls(records, 'k1')).toBe(2);
    expect(checkNoDoubleRoll([{ keyId: 'k1', emulatorRolls: 2, reportedRolls: 2 }]).mismatched).toBe(0);
    expect(checkNoDoubleRoll([{ keyId: 'k1', emulatorRolls: 3, reportedRolls: 2 }]).mismatched).toBe(1);
  });

  it('counts the roll of a run that died before reporting it, once, when recovery finds the stored secret dead', () => {
    const recovery = (left: string) => [
      { event: 'key.recovery.started', keyId: 'k1', rotationId: 'r2', leftRotationId: left },
      { event: 'key.probe', keyId: 'k1', rotationId: 'r2', step: 'recovery', verdict: 'stored-secret-dead' },
      { event: 'key.rolled', keyId: 'k1', rotationId: 'r2' },
    ];
    // r1 died between roll and store: only the recovery knows it rolled.
    expect(reportedRolls(recovery('r1'), 'k1')).toBe(2);
    // r1 reported its roll (then failed to store): the recovery adds nothing.
    expect(
      reportedRolls([{ event: 'key.rolled', keyId: 'k1', rotationId: 'r1' }, ...recovery('r1')], 'k1'),
    ).toBe(2);
  });
});

describe('reporter', () => {
  const row = (overrides: Partial<FaultRow>): FaultRow => ({
    case: 'store × backend down (vault)',
    fault: 'backend down',
    backend: 'vault',
    step: 'store',
    result: 'failed',
    lost: 0,
    leaked: 0,
    alerted: 1,
    failures: 1,
    test: 'passed',
    module: 'm',
    ...overrides,
  });

  it('sums the rows into the summary line', () => {
    const rows = [row({}), row({ result: 'rotated', alerted: 0, failures: 0 }), row({ lost: 1, leaked: 2 })];
    expect(summaryLine(faultTotals(rows))).toBe('3 cases, 1 lost, 2 leaked, 2 alerted of 2 failures');
  });

  it('prints one aligned row per case and flags failed tests', () => {
    const lines = faultTable([row({}), row({ case: 'x', test: 'failed' })]).split('\n');
    expect(lines[0]).toMatch(/^case\s+fault\s+result\s+lost\s+leaked\s+alerted$/);
    expect(lines).toHaveLength(4);
    expect(lines[3]).toContain('x [TEST FAILED]');
  });
});
