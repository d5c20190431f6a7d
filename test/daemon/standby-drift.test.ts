// The daemon's sweep probes both slots of a two-slot entry (issue 18): a standby rolled outside
// keyroll is alerted (KR_DRIFT_STANDBY_DEAD) and rolled as the standby; the active slot, whose value
// consumers use, is not rolled for it (invariant 10).
import { describe, expect, it, vi } from 'vitest';
import { policyYaml, useDaemonBench } from '../support/daemon-bench.ts';

const ENTRY = 'billing-api';
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';
const bench = useDaemonBench();

function entryYaml(): string {
  const org = bench.emulator.state.apiKey(SLOT_A).organizationId;
  return `  - id: ${ENTRY}
    organization: ${org}
    slots: [${SLOT_A}, ${SLOT_B}]
    consumerRefresh: 1h
    minInterval: 1h
    maxAge: 4h
    driftCheck: 10m
    destinations: [{ backend: files, path: ${ENTRY}.json }]
`;
}

describe('daemon sweep: a dead standby', () => {
  it('is found by the next sweep, alerted, and rolled as the standby; the active slot is not rolled', async () => {
    await bench.writePolicyText(policyYaml(bench.emulator.url, bench.secretsDir, entryYaml()));
    vi.useFakeTimers({
      now: new Date('2030-01-07T00:00:00Z'),
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
    const daemon = await bench.start();
    await daemon.idle();
    // Two alternations: B, then A. A is active; the value kept before it is B's.
    vi.setSystemTime(new Date('2030-01-07T05:00:00Z'));
    await daemon.sweep();
    await daemon.idle();
    expect([bench.emulator.state.rollCount(SLOT_A), bench.emulator.state.rollCount(SLOT_B)]).toEqual([1, 1]);

    bench.emulator.state.rollKey(SLOT_B);
    vi.setSystemTime(new Date('2030-01-07T05:20:00Z'));
    await daemon.sweep();
    await daemon.idle();
    expect(bench.alerter.alerts.map(({ alert }) => [alert.errorCode, alert.severity])).toEqual([
      ['KR_DRIFT_STANDBY_DEAD', 'error'],
    ]);
    expect([bench.emulator.state.rollCount(SLOT_A), bench.emulator.state.rollCount(SLOT_B)]).toEqual([1, 3]);
    expect(bench.events('key.succeeded')).toHaveLength(3);
    expect(bench.emulator.state.isLiveSecret(SLOT_B, await bench.storedSecret(ENTRY))).toBe(true);
  });
});
