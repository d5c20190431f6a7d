// The gauges the daemon's sweep reads from every key's state (keyroll_keys_drifted, _locked and
// keyroll_key_max_age_seconds), as Prometheus scrapes them from /metrics: drift found by a probe
// and not healed is counted until a rotation stores a working secret, also by a daemon that only
// reads it from the backend after a restart; a lock another runner holds is counted while it holds.
import { describe, expect, it } from 'vitest';
import type { StoreTarget } from '../../src/backends/types.ts';
import { openFileBackend } from '../cli/harness.ts';
import { keyYaml, METRICS_TOKEN, useDaemonBench } from '../support/daemon-bench.ts';

const KEY = 'key_demo_billing';
const TARGET: StoreTarget = {
  path: `${KEY}.json`,
  shape: { format: 'json', secretField: 'apiKey', fields: ['keyId', 'organizationId', 'rotatedAt'] },
};
const bench = useDaemonBench();

async function scrape(url: string): Promise<string> {
  return (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
}

describe('keyroll_keys_drifted', () => {
  it('counts a key rolled outside keyroll from its probe until a drift heal rotates it', async () => {
    await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * 1"\ndriftCheck: 1h\nonDrift: alert'));
    const first = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await first.idle();
    expect(await scrape(first.url)).toContain('keyroll_keys_drifted 0');
    bench.emulator.state.rollKey(KEY);
    await first.sweep();
    expect(await scrape(first.url)).toContain('keyroll_keys_drifted 1');
    // Still dead on the next sweep: the count stays until a rotation stores a working secret.
    await first.sweep();
    expect(await scrape(first.url)).toContain('keyroll_keys_drifted 1');
    await first.shutdown();

    // A daemon whose policy heals drift (onDrift: rotate) rotates it on its first sweep.
    await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * 1"\ndriftCheck: 1h\nonDrift: rotate'));
    const second = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await second.idle();
    expect(bench.emulator.state.isLiveSecret(KEY, await bench.storedSecret(KEY))).toBe(true);
    expect(await scrape(second.url)).toContain('keyroll_keys_drifted 0');
  });

  it('a restarted daemon reads unhealed drift from the backend on its first sweep', async () => {
    await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * 1"'));
    const first = await bench.start();
    await first.idle();
    await first.shutdown();
    const backend = await openFileBackend(bench.secretsDir);
    await backend.recordProbe(TARGET, { at: new Date(Date.now() + 1000).toISOString(), result: 'dead' });
    await backend.close();
    const second = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await second.idle();
    expect(await scrape(second.url)).toContain('keyroll_keys_drifted 1');
  });
});

describe('keyroll_keys_locked and keyroll_key_max_age_seconds', () => {
  it('counts a key whose lock another runner holds, and publishes each key maxAge in seconds', async () => {
    await bench.writePolicy(
      keyYaml(KEY, 'maxAge: 30d') + keyYaml('key_demo_search', 'schedule: "0 3 * * 1"'),
    );
    const backend = await openFileBackend(bench.secretsDir);
    const held = await backend.acquireLock(TARGET, {
      owner: 'other-runner',
      rotationId: 'r-other',
      ttlMs: 3_600_000,
      clockSkewMs: 0,
    });
    expect(held.acquired).toBe(true);
    const daemon = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await daemon.idle();
    const text = await scrape(daemon.url);
    expect(text).toContain('keyroll_keys_locked 1');
    expect(text).toContain(`keyroll_key_max_age_seconds{key_id="${KEY}"} 2592000`);
    expect(text).not.toContain('keyroll_key_max_age_seconds{key_id="key_demo_search"}');
    if (held.acquired) await backend.releaseLock(TARGET, held.lock);
    await backend.close();
    await daemon.sweep();
    expect(await scrape(daemon.url)).toContain('keyroll_keys_locked 0');
  });
});
