// Policy reload (SIGHUP calls daemon.reload()): an invalid new policy keeps the old one in force,
// schedules included, and is audited with file:line and alerted; a valid one swaps schedules and
// keys; a rotation in flight on the old policy's runtime finishes after the swap.
import { describe, expect, it, vi } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.ts';
import { wrapBackend } from '../rotation/harness.ts';
import { createGate, keyYaml, useDaemonBench } from '../support/daemon-bench.ts';

const BILLING = 'key_demo_billing';
const SEARCH = 'key_demo_search';
const bench = useDaemonBench();

async function advance(ms: number, daemon: Daemon): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  await daemon.idle();
}

describe('daemon reload', () => {
  it('an invalid policy keeps the old one and its schedules, is audited with file:line, and alerts', async () => {
    await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 3 * * *"'));
    vi.useFakeTimers({
      now: new Date('2030-01-07T01:00:00Z'),
      toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
    });
    const daemon = await bench.start();
    await daemon.idle();
    const before = daemon.schedules();

    await bench.writePolicy(keyYaml(BILLING, 'schedule: "not a cron"'));
    const result = await daemon.reload();
    expect(result).toMatchObject({ ok: false, errorCode: 'KR_POLICY_INVALID' });
    expect(!result.ok && result.error).toMatch(
      /policy\.yaml:\d+ keys\[0\]\.schedule: "not a cron" is not a cron expression/,
    );
    expect(bench.events('policy.reload_failed')).toEqual([
      expect.objectContaining({ file: bench.policyFile, errorCode: 'KR_POLICY_INVALID' }),
    ]);
    expect(bench.alerter.alerts.map((a) => a.alert)).toEqual([
      expect.objectContaining({ severity: 'error', step: 'reload', errorCode: 'KR_POLICY_INVALID' }),
    ]);
    expect(daemon.schedules()).toEqual(before);
    expect(bench.events('policy.reloaded')).toEqual([]);

    // The old schedule is still the one that fires.
    vi.setSystemTime(new Date('2030-01-07T02:59:00Z'));
    await advance(60_000, daemon);
    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);
  });

  it('an unreadable policy file is a failed reload too', async () => {
    await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 3 * * *"'));
    const daemon = await bench.start();
    await daemon.idle();
    await bench.writePolicyText('version: 1\nkeys: [\n');
    expect(await daemon.reload()).toMatchObject({ ok: false, errorCode: 'KR_POLICY_SYNTAX' });
    expect(daemon.policy().keys.map((key) => key.id)).toEqual([BILLING]);
  });

  it('a valid policy swaps schedules and keys, sweeps the new keys, and drops the old keys from the metrics', async () => {
    await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 3 * * *"'));
    const daemon = await bench.start();
    await daemon.idle();
    expect(await daemon.metrics.registry.metrics()).toContain(`key_id="${BILLING}"`);

    await bench.writePolicy(keyYaml(SEARCH, 'schedule: "30 2 * * *"\ntimezone: Europe/Berlin'));
    expect(await daemon.reload()).toEqual({ ok: true, keys: 1 });
    await daemon.idle();
    expect(daemon.schedules()).toEqual([
      expect.objectContaining({ pattern: '30 2 * * *', timezone: 'Europe/Berlin', keyIds: [SEARCH] }),
    ]);
    expect(bench.events('policy.reloaded')).toEqual([
      expect.objectContaining({ file: bench.policyFile, keys: 1 }),
    ]);
    // search was never rotated: the sweep after the reload rotates it.
    expect(bench.emulator.state.rollCount(SEARCH)).toBe(1);
    const metrics = await daemon.metrics.registry.metrics();
    expect(metrics).not.toContain(`key_id="${BILLING}"`);
    expect(metrics).toContain(`key_id="${SEARCH}"`);
  });

  it('a rotation in flight on the old policy finishes its store after the swap', async () => {
    const gate = createGate();
    await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 3 * * *"'));
    const daemon = await bench.start({
      runtime: {
        wrapBackend: (_name, backend) =>
          wrapBackend(backend, {
            writeSecret: async (next) => {
              await gate.wait();
              return next();
            },
          }),
      },
    });
    await gate.reached;
    await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 4 * * *"'));
    expect(await daemon.reload()).toEqual({ ok: true, keys: 1 });
    gate.open();
    await daemon.idle();
    expect(bench.events('key.succeeded')).toHaveLength(1);
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
    expect(bench.emulator.state.isLiveSecret(BILLING, await bench.storedSecret(BILLING))).toBe(true);
  });
});
