// The daemon's HTTP surface besides the trigger: /healthz, /readyz (policy loaded and every
// destination preflighted, 503 with the reason otherwise) and /metrics (Prometheus text with
// every keyroll metric after a rotation), over real loopback HTTP.
import { rm, writeFile } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import { wrapBackend } from '../rotation/harness.ts';
import { createGate, keyYaml, startDaemonBench, type DaemonBench } from './support.ts';

const KEY = 'key_demo_billing';
let bench: DaemonBench;

beforeEach(async () => {
  bench = await startDaemonBench();
  await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * 1"'));
});

afterEach(async () => {
  await bench.close();
});

async function get(url: string): Promise<{ status: number; type: string | null; text: string }> {
  const response = await fetch(url);
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
}

describe('/healthz and /readyz', () => {
  it('/healthz is 200 at once; /readyz turns 200 only after every destination passed preflight', async () => {
    const gate = createGate();
    const daemon = await bench.start({
      runtime: { wrapBackend: (_name, backend) => wrapBackend(backend, { preflight: async (next) => { await gate.wait(); return next(); } }) },
    });
    await gate.reached;
    expect((await get(`${daemon.url}/healthz`)).status).toBe(200);
    const starting = await get(`${daemon.url}/readyz`);
    expect(starting.status).toBe(503);
    expect(JSON.parse(starting.text)).toMatchObject({ status: 'starting' });
    gate.open();
    await daemon.idle();
    const ready = await get(`${daemon.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.text)).toMatchObject({ status: 'ready', keys: 1, destinations: 1 });
  });

  it('/readyz is 503 naming the destination while it fails preflight, and 200 once a sweep finds it fixed', async () => {
    // A regular file where the backend expects its directory: unwritable even for root.
    await writeFile(bench.secretsDir, 'not a directory');
    const daemon = await bench.start();
    await daemon.idle();
    const failing = await get(`${daemon.url}/readyz`);
    expect(failing.status).toBe(503);
    expect(JSON.parse(failing.text)).toMatchObject({ status: 'preflight-failed', failures: [{ backend: 'files', path: `${KEY}.json` }] });
    expect(bench.events('daemon.preflight.failed')).toEqual([expect.objectContaining({ backend: 'files', path: `${KEY}.json` })]);

    await rm(bench.secretsDir);
    await daemon.sweep();
    expect((await get(`${daemon.url}/readyz`)).status).toBe(200);
  });

  it('/readyz is 503 while the backend refuses preflight; /healthz stays 200 and nothing is rolled', async () => {
    const down = new BackendError('KR_BACKEND_UNAVAILABLE', 'injected: backend down', { backend: 'files', kind: 'file', operation: 'preflight', path: `${KEY}.json` });
    const daemon = await bench.start({ runtime: { wrapBackend: (_name, backend) => wrapBackend(backend, { preflight: () => Promise.reject(down) }) } });
    await daemon.idle();
    expect((await get(`${daemon.url}/readyz`)).status).toBe(503);
    expect((await get(`${daemon.url}/healthz`)).status).toBe(200);
    expect(bench.emulator.state.rollCount(KEY)).toBe(0);
  });

  it('unknown routes are 404 and wrong methods 405', async () => {
    const daemon = await bench.start();
    await daemon.idle();
    expect((await get(`${daemon.url}/nope`)).status).toBe(404);
    expect((await fetch(`${daemon.url}/healthz`, { method: 'POST' })).status).toBe(405);
    expect((await get(`${daemon.url}/v1/rotations`)).status).toBe(405);
  });
});

describe('/metrics', () => {
  it('serves the Prometheus text format with every keyroll metric after a rotation', async () => {
    const daemon = await bench.start();
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    const metrics = await get(`${daemon.url}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.type).toContain('text/plain');
    expect(metrics.text).toContain('keyroll_rotations_total{result="rotated",reason="scheduled"} 1');
    for (const step of ['preflight', 'lock', 'intent', 'roll', 'verify', 'finish']) {
      expect(metrics.text).toContain(`keyroll_rotation_step_duration_seconds_count{step="${step}"} 1`);
    }
    expect(metrics.text).toContain('keyroll_secret_exposure_window_seconds_count 1');
    expect(metrics.text).toMatch(new RegExp(`keyroll_key_last_rotation_timestamp_seconds\\{key_id="${KEY}"\\} \\d+`));
    expect(metrics.text).toContain('keyroll_keys_overdue 0');
    expect(metrics.text).toContain('# TYPE keyroll_alerts_total counter');
    // The secret's fingerprint is the most that may appear anywhere; here not even that.
    expect(metrics.text).not.toContain(await bench.storedSecret(KEY));
  });

  it('sets the last-rotation time of keys rotated before the daemon started, from backend state', async () => {
    const first = await bench.start();
    await first.idle();
    await first.shutdown();
    const rotatedAt = bench.events('key.succeeded')[0]?.time as string;
    const second = await bench.start();
    await second.idle();
    const text = (await get(`${second.url}/metrics`)).text;
    const match = new RegExp(`keyroll_key_last_rotation_timestamp_seconds\\{key_id="${KEY}"\\} (\\d+(?:\\.\\d+)?)`).exec(text);
    expect(Number(match?.[1])).toBeCloseTo(Date.parse(rotatedAt) / 1000, 0);
    expect(text).not.toContain('keyroll_rotations_total{');
  });
});
