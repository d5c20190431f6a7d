// Proof of death: after a leak rotation keyroll calls the emulator with the leaked value. 401 is
// proof; a value that still opens the API is audited and alerted critical; no answer that says
// is audited and alerted too. The leaked value never appears in what is written.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import { probeLeakedSecret, proveLeakDead } from '../../src/leaks/proof.ts';
import type { Runtime } from '../../src/rotation/runtime.ts';
import { keyPolicy, startBench, type Bench } from '../rotation/harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';

const BILLING = 'key_demo_billing';

let bench: Bench;
let runtime: Runtime;

beforeEach(async () => {
  bench = await startBench({
    keys: (org) => [keyPolicy(BILLING, org(BILLING), { notify: { onFailure: ['pager'], onSuccess: [] } })],
  });
  runtime = await bench.runtime();
});
afterEach(async () => {
  await runtime.close();
  await bench.close();
});

/** The leaked value: the key's secret as the emulator minted it. */
function leakedValue(): string {
  return bench.emulator.state.currentSecret(BILLING);
}

function expectNothingLeaked(value: string): void {
  const written = [...bench.lines, JSON.stringify(bench.alerter.alerts)];
  expectNoSecrets(written, [value]);
}

describe('probeLeakedSecret', () => {
  it("a rolled-away value is 'refused' (the API answered 401)", async () => {
    const value = leakedValue();
    bench.emulator.state.rollKey(BILLING);
    expect((await probeLeakedSecret(runtime, new Secret(value), bench.orgOf(BILLING))).verdict).toBe(
      'refused',
    );
  });

  it("a value that still opens the API is 'still-works'", async () => {
    expect((await probeLeakedSecret(runtime, new Secret(leakedValue()), bench.orgOf(BILLING))).verdict).toBe(
      'still-works',
    );
  });

  it("an answer that says nothing about the key (500) is 'unknown', not proof", async () => {
    bench.emulator.faults.inject('listProjects', { kind: 'status', status: 500 });
    expect((await probeLeakedSecret(runtime, new Secret(leakedValue()), bench.orgOf(BILLING))).verdict).toBe(
      'unknown',
    );
  });
});

describe('proveLeakDead', () => {
  it('audits leak.proven-dead with the fingerprint and the rotation, and alerts nobody', async () => {
    const value = leakedValue();
    bench.emulator.state.rollKey(BILLING);
    const leaked = new Secret(value);
    const proof = await proveLeakDead(runtime, bench.audit, bench.alerter, {
      key: bench.key(BILLING),
      leaked,
      rotationId: 'rot-1',
      rotation: 'rotated',
    });
    expect(proof).toMatchObject({
      verdict: 'refused',
      keyId: BILLING,
      rotationId: 'rot-1',
      fingerprint: leaked.fingerprint(),
    });
    await bench.audit.flush();
    expect(bench.events().filter((e) => e.event.startsWith('leak.'))).toEqual([
      expect.objectContaining({
        event: 'leak.proven-dead',
        level: 'info',
        keyId: BILLING,
        rotationId: 'rot-1',
        fingerprint: leaked.fingerprint(),
        status: 401,
        rotation: 'rotated',
      }),
    ]);
    expect(bench.alerter.alerts).toEqual([]);
    expectNothingLeaked(value);
  });

  it("a leaked value that still works after the rotation is audited leak.still-alive and alerted critical (KR_LEAK_STILL_ALIVE) to the key's failure sinks", async () => {
    const value = leakedValue();
    const proof = await proveLeakDead(runtime, bench.audit, bench.alerter, {
      key: bench.key(BILLING),
      leaked: new Secret(value),
      rotationId: 'rot-2',
      rotation: 'rotated',
    });
    expect(proof.verdict).toBe('still-works');
    await bench.audit.flush();
    expect(bench.events().filter((e) => e.event.startsWith('leak.'))).toEqual([
      expect.objectContaining({ event: 'leak.still-alive', level: 'error', keyId: BILLING }),
    ]);
    expect(bench.alerter.alerts).toEqual([
      {
        alert: expect.objectContaining({
          severity: 'critical',
          errorCode: 'KR_LEAK_STILL_ALIVE',
          keyId: BILLING,
          rotationId: 'rot-2',
          step: 'leak-proof',
        }) as unknown,
        sinks: ['pager'],
      },
    ]);
    expectNothingLeaked(value);
  });

  it('no answer that says is audited leak.unproven and alerted (KR_LEAK_UNPROVEN): nobody may assume the leak closed', async () => {
    const value = leakedValue();
    bench.emulator.faults.inject('listProjects', { kind: 'status', status: 503 });
    const proof = await proveLeakDead(runtime, bench.audit, bench.alerter, {
      key: bench.key(BILLING),
      leaked: new Secret(value),
    });
    expect(proof.verdict).toBe('unknown');
    expect(proof.errorCode).toMatch(/^KR_API_/);
    await bench.audit.flush();
    expect(bench.events().filter((e) => e.event.startsWith('leak.'))).toEqual([
      expect.objectContaining({ event: 'leak.unproven', level: 'error', errorCode: proof.errorCode }),
    ]);
    expect(bench.alerter.alerts.map((a) => [a.alert.severity, a.alert.errorCode])).toEqual([
      ['error', 'KR_LEAK_UNPROVEN'],
    ]);
    expectNothingLeaked(value);
  });
});
