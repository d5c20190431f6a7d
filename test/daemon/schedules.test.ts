// The daemon's clock-driven behaviour under vitest's fake timers (croner schedules on setTimeout
// and reads new Date(), both faked): a scheduled key rotates at its minute and not before, a
// restarted daemon does not rotate it again, age-only keys are picked up by the sweep, and the
// overdue gauge and the failure back-off come from the backend state the sweep reads.
import { describe, expect, it, vi } from 'vitest';
import type { Daemon } from '../../src/daemon/daemon.ts';
import { keyYaml, useDaemonBench } from '../support/daemon-bench.ts';

const KEY = 'key_demo_billing';
const MINUTE = 60_000;
const bench = useDaemonBench();

/** Fake setTimeout/Date only: sockets, fs and promises stay real, so the emulator and files work. */
function useFakeClock(at: string): void {
  vi.useFakeTimers({
    now: new Date(at),
    toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date'],
  });
}

async function advance(ms: number, daemon: Daemon): Promise<void> {
  await vi.advanceTimersByTimeAsync(ms);
  await daemon.idle();
}

describe('daemon schedules', () => {
  it('rotates a scheduled key at its scheduled minute and not a second before', async () => {
    await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * *"'));
    useFakeClock('2030-01-07T01:00:00Z');
    const daemon = await bench.start();
    await daemon.idle();
    // Never rotated by keyroll: the first sweep rotates it at once (its age is unknown).
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(daemon.schedules()).toEqual([
      { pattern: '0 3 * * *', timezone: 'UTC', keyIds: [KEY], nextRunAt: '2030-01-07T03:00:00.000Z' },
    ]);

    vi.setSystemTime(new Date('2030-01-07T02:59:00Z'));
    await advance(59_999, daemon);
    expect(new Date().toISOString()).toBe('2030-01-07T02:59:59.999Z');
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);

    await advance(1, daemon);
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
    const succeeded = bench.events('key.succeeded');
    expect(succeeded).toHaveLength(2);
    expect(succeeded[1]?.time).toBe('2030-01-07T03:00:00.000Z');
    expect(bench.events('run.started').map((e) => e.command)).toEqual(['daemon sweep', 'daemon schedule']);
    expect(bench.emulator.state.isLiveSecret(KEY, await bench.storedSecret(KEY))).toBe(true);
  });

  it('a restarted daemon on the same backend state does not rotate the key again', async () => {
    await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * *"'));
    useFakeClock('2030-01-07T02:59:30Z');
    const first = await bench.start({ checkIntervalMs: 5 * MINUTE });
    await first.idle();
    await advance(30_000, first);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect((await first.shutdown('SIGTERM')).exitCode).toBe(0);

    const rolledAt = bench.events('key.succeeded').map((e) => e.time);
    const second = await bench.start({ checkIntervalMs: 5 * MINUTE });
    await second.idle();
    for (let i = 0; i < 6; i++) await advance(5 * MINUTE, second);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(bench.events('key.succeeded').map((e) => e.time)).toEqual(rolledAt);
    expect(second.schedules()[0]?.nextRunAt).toBe('2030-01-08T03:00:00.000Z');
  });

  it('reads the schedule in the key time zone', async () => {
    await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * *"\ntimezone: Europe/Berlin'));
    useFakeClock('2030-07-01T00:00:00Z');
    const daemon = await bench.start();
    await daemon.idle();
    // 03:00 in Berlin in summer is 01:00 UTC.
    expect(daemon.schedules()[0]?.nextRunAt).toBe('2030-07-01T01:00:00.000Z');
    await advance(60 * MINUTE - 1, daemon);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    await advance(1, daemon);
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
  });
});

describe('daemon sweep', () => {
  it('rotates a key that has only a maxAge on the first sweep after it ages out', async () => {
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 2h'));
    useFakeClock('2030-01-07T01:00:00Z');
    const daemon = await bench.start({ checkIntervalMs: 10 * MINUTE });
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    expect(daemon.schedules()).toEqual([]);
    for (let i = 0; i < 11; i++) await advance(10 * MINUTE, daemon);
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    await advance(10 * MINUTE, daemon);
    expect(bench.emulator.state.rollCount(KEY)).toBe(2);
    expect(bench.events('key.succeeded').at(-1)?.time).toBe('2030-01-07T03:00:00.000Z');
  });

  it('counts a key past its maxAge as overdue while its rotation fails, and retries it only after the back-off', async () => {
    await bench.writePolicy(keyYaml(KEY, 'maxAge: 1h'));
    useFakeClock('2030-01-07T01:00:00Z');
    const daemon = await bench.start({ checkIntervalMs: 30 * MINUTE, retryFailedAfterMs: 2 * 60 * MINUTE });
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    // From now on the API refuses every roll of this key (the organization lost its plan).
    bench.emulator.faults.inject('roll', { kind: 'status', status: 402, code: 'PLAN_REQUIRED' }, 100);

    await advance(30 * MINUTE, daemon); // 01:30: one hour not reached
    await advance(30 * MINUTE, daemon); // 02:00: past maxAge → rotation fails
    expect(bench.emulator.state.callCount('roll')).toBe(2);
    const metrics = await daemon.metrics.registry.metrics();
    expect(metrics).toContain('keyroll_keys_overdue 1');
    expect(metrics).toContain('keyroll_rotations_total{result="failed",reason="scheduled"} 1');
    expect(bench.alerter.alerts.map((a) => a.alert.errorCode)).toContain('KR_API_PLAN_REQUIRED');

    await advance(30 * MINUTE, daemon); // 02:30 and 03:30: inside the back-off, not retried
    await advance(60 * MINUTE, daemon);
    expect(bench.emulator.state.callCount('roll')).toBe(2);
    await advance(30 * MINUTE, daemon); // 04:00: back-off over
    expect(bench.emulator.state.callCount('roll')).toBe(3);
    expect(await daemon.metrics.registry.metrics()).toContain('keyroll_keys_overdue 1');
  });
});
