// The metric definitions: names, labels and units as docs/metrics.md states them, what counts as
// a rotation, and that every metric lives in its own registry (never prom-client's global one).
import { register as globalRegistry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  createMetrics,
  EXPOSURE_BUCKETS_SECONDS,
  LEAK_TIME_TO_DEAD_BUCKETS_SECONDS,
  PER_KEY_METRICS,
  RUN_REASONS,
} from '../../src/metrics/metrics.ts';
import type { KeyOutcome } from '../../src/rotation/types.ts';

const outcome = (result: KeyOutcome['result'], extra: Partial<KeyOutcome> = {}): KeyOutcome =>
  ({
    keyId: 'k1',
    organizationId: 'o',
    result,
    durationMs: 1,
    rolls: 1,
    ...extra,
  }) as KeyOutcome;
const at = new Date('2030-01-07T03:00:00Z');

describe('createMetrics', () => {
  it('registers the six keyroll metrics in a fresh registry', async () => {
    const metrics = createMetrics();
    const text = await metrics.registry.metrics();
    for (const [name, type] of [
      ['keyroll_rotations_total', 'counter'],
      ['keyroll_rotation_step_duration_seconds', 'histogram'],
      ['keyroll_secret_exposure_window_seconds', 'histogram'],
      ['keyroll_key_last_rotation_timestamp_seconds', 'gauge'],
      ['keyroll_keys_overdue', 'gauge'],
      ['keyroll_alerts_total', 'counter'],
    ]) {
      expect(text).toContain(`# TYPE ${name} ${type}`);
    }
    expect(await globalRegistry.metrics()).not.toContain('keyroll_');
  });

  it('keyroll_keys_quarantined is a gauge the daemon and scheduled runs set, left out where unknown', async () => {
    const metrics = createMetrics();
    metrics.setQuarantined(2);
    const text = await metrics.registry.metrics();
    expect(text).toContain('# TYPE keyroll_keys_quarantined gauge');
    expect(text).toContain('keyroll_keys_quarantined 2');
    const unknown = createMetrics({ quarantined: false });
    unknown.setQuarantined(2);
    expect(await unknown.registry.metrics()).not.toContain('keyroll_keys_quarantined');
  });

  it('counts throttle answers and paced waits per backend and quota group', async () => {
    const metrics = createMetrics();
    const event = {
      backend: 'aws-prod',
      kind: 'aws',
      group: 'write',
      operation: 'write',
      path: 'keyroll/a',
    } as const;
    metrics.observer.throttled?.({ ...event, attempt: 1, waitMs: 250, afterRoll: false });
    metrics.observer.throttled?.({ ...event, attempt: 2, waitMs: 500, afterRoll: true });
    metrics.observer.paced?.({ ...event, waitMs: 1500 });
    const text = await metrics.registry.metrics();
    expect(text).toContain('keyroll_backend_throttled_total{backend="aws-prod",group="write"} 2');
    expect(text).toContain('keyroll_backend_quota_wait_seconds_total{backend="aws-prod",group="write"} 1.5');
  });

  it("the sweep gauges (drifted, locked) are the daemon's, left out of one-shot runs", async () => {
    const metrics = createMetrics();
    metrics.setDrifted(1);
    metrics.setLocked(2);
    const text = await metrics.registry.metrics();
    expect(text).toContain('# TYPE keyroll_keys_drifted gauge');
    expect(text).toContain('keyroll_keys_drifted 1');
    expect(text).toContain('keyroll_keys_locked 2');
    const oneShot = createMetrics({ sweepGauges: false });
    oneShot.setDrifted(1);
    oneShot.setLocked(1);
    expect(await oneShot.registry.metrics()).not.toMatch(/keyroll_keys_(drifted|locked)/);
  });

  it('publishes each key maxAge in seconds as a per-key series, removed with the key or its maxAge', async () => {
    const metrics = createMetrics();
    metrics.setMaxAge('k1', 30 * 86_400_000);
    metrics.setMaxAge('k2', 3_600_000);
    metrics.setMaxAge('k2', undefined);
    metrics.setMaxAge('k3', 60_000);
    metrics.forgetKey('k3');
    const text = await metrics.registry.metrics();
    expect(text).toContain('keyroll_key_max_age_seconds{key_id="k1"} 2592000');
    expect(text).not.toMatch(/key_id="k[23]"/);
    expect(PER_KEY_METRICS.has('keyroll_key_max_age_seconds')).toBe(true);
    expect(await metrics.exposition({ perKey: false })).not.toContain('keyroll_key_max_age_seconds{');
  });

  it('observes the time from a leak report to its leaked value refused, in seconds', async () => {
    const metrics = createMetrics();
    metrics.recordLeakDead(4_200);
    const text = await metrics.registry.metrics();
    expect(text).toContain('keyroll_leak_time_to_dead_seconds_count 1');
    expect(text).toContain('keyroll_leak_time_to_dead_seconds_sum 4.2');
    expect(text).toContain('keyroll_leak_time_to_dead_seconds_bucket{le="2.5"} 0');
    expect(text).toContain('keyroll_leak_time_to_dead_seconds_bucket{le="5"} 1');
    expect(LEAK_TIME_TO_DEAD_BUCKETS_SECONDS.at(-1)).toBe(3600);
  });

  it('starts every result and run reason, each known sink, and each backend quota group, at 0, so the first failure or throttle is an increase Prometheus sees', async () => {
    const metrics = createMetrics();
    metrics.knowSinks(['pager', 'chat']);
    metrics.knowBackends([
      { name: 'aws-prod', kind: 'aws' },
      { name: 'bao', kind: 'vault' },
      { name: 'files', kind: 'file' },
    ]);
    const text = await metrics.registry.metrics();
    for (const result of ['rotated', 'recovered', 'failed', 'skipped', 'busy', 'aborted']) {
      for (const reason of RUN_REASONS)
        expect(text).toContain(`keyroll_rotations_total{result="${result}",reason="${reason}"} 0`);
    }
    expect(text).not.toMatch(/reason="(recovery|drift)"/);
    for (const sink of ['pager', 'chat'])
      for (const result of ['sent', 'failed'])
        expect(text).toContain(`keyroll_alerts_total{sink="${sink}",result="${result}"} 0`);
    for (const group of ['write', 'tag', 'read', 'create']) {
      expect(text).toContain(`keyroll_backend_throttled_total{backend="aws-prod",group="${group}"} 0`);
      expect(text).toContain(
        `keyroll_backend_quota_wait_seconds_total{backend="aws-prod",group="${group}"} 0`,
      );
    }
    expect(text).toContain('keyroll_backend_throttled_total{backend="bao",group="request"} 0');
    expect(text).not.toContain('backend="files"');
  });

  it('can leave out keyroll_keys_overdue (one-shot runs do not know it)', async () => {
    const metrics = createMetrics({ overdue: false });
    metrics.setOverdue(3);
    expect(await metrics.registry.metrics()).not.toContain('keyroll_keys_overdue');
  });

  it('counts outcomes by result and reason, leaving out "not due" skips, and stamps successes', async () => {
    const metrics = createMetrics({ now: () => at });
    metrics.recordOutcome(outcome('rotated'), 'scheduled');
    metrics.recordOutcome(outcome('recovered', { keyId: 'k2' }), 'leak');
    metrics.recordOutcome(outcome('failed', { keyId: 'k3' }), 'scheduled');
    metrics.recordOutcome(outcome('skipped', { keyId: 'k4', detail: 'not-due' }), 'scheduled');
    metrics.recordOutcome(outcome('skipped', { keyId: 'k5', detail: 'min-interval' }), 'manual');
    const text = await metrics.registry.metrics();
    expect(text).toContain('keyroll_rotations_total{result="rotated",reason="scheduled"} 1');
    expect(text).toContain('keyroll_rotations_total{result="recovered",reason="leak"} 1');
    expect(text).toContain('keyroll_rotations_total{result="failed",reason="scheduled"} 1');
    expect(text).toContain('keyroll_rotations_total{result="skipped",reason="manual"} 1');
    expect(text).toContain('keyroll_rotations_total{result="skipped",reason="scheduled"} 0');
    expect(text).toContain(`keyroll_key_last_rotation_timestamp_seconds{key_id="k1"} ${at.getTime() / 1000}`);
    expect(text).toContain(`keyroll_key_last_rotation_timestamp_seconds{key_id="k2"} ${at.getTime() / 1000}`);
    expect(text).not.toContain('key_id="k3"');
  });

  it('observes durations and the exposure window in seconds', async () => {
    const metrics = createMetrics();
    metrics.observer.stepDuration('store', 40);
    metrics.observer.exposure(3);
    const text = await metrics.registry.metrics();
    expect(text).toContain('keyroll_rotation_step_duration_seconds_sum{step="store"} 0.04');
    expect(text).toContain('keyroll_secret_exposure_window_seconds_sum 0.003');
    expect(text).toContain('keyroll_secret_exposure_window_seconds_bucket{le="0.005"} 1');
    expect(text).toContain('keyroll_secret_exposure_window_seconds_bucket{le="0.0025"} 0');
    // Millisecond resolution at the bottom, tens of seconds at the top.
    expect(EXPOSURE_BUCKETS_SECONDS[0]).toBe(0.001);
    expect(EXPOSURE_BUCKETS_SECONDS.at(-1)).toBe(30);
  });

  it('sets and forgets a key last rotation from ISO time, ignoring unparseable times', async () => {
    const metrics = createMetrics();
    metrics.setLastRotation('k1', '2030-01-07T03:00:00.500Z');
    metrics.setLastRotation('k2', 'yesterday');
    let text = await metrics.registry.metrics();
    expect(text).toContain('keyroll_key_last_rotation_timestamp_seconds{key_id="k1"} 1893985200.5');
    expect(text).not.toContain('key_id="k2"');
    metrics.forgetKey('k1');
    text = await metrics.registry.metrics();
    expect(text).not.toContain('key_id="k1"');
  });

  it('counts alerts per sink and result', async () => {
    const metrics = createMetrics();
    metrics.recordAlert('pager', 'sent');
    metrics.recordAlert('pager', 'failed');
    metrics.recordAlert('pager', 'failed');
    const text = await metrics.registry.metrics();
    expect(text).toContain('keyroll_alerts_total{sink="pager",result="sent"} 1');
    expect(text).toContain('keyroll_alerts_total{sink="pager",result="failed"} 2');
  });
});
