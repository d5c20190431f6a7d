// The daemon's HTTP surface besides the trigger: /healthz, /readyz (policy loaded and every
// destination preflighted; a status only, the reasons go to the audit), /metrics (Prometheus
// text; per-key series only with the metrics token), and the server's limits (connection cap,
// half-open requests dropped), over real loopback HTTP.
import { rm, writeFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { beforeEach, describe, expect, it } from 'vitest';
import { BackendError } from '../../src/backends/errors.ts';
import { wrapBackend } from '../rotation/harness.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { createGate, keyYaml, METRICS_TOKEN, useDaemonBench } from '../support/daemon-bench.ts';

const KEY = 'key_demo_billing';
const bench = useDaemonBench();

beforeEach(async () => {
  await bench.writePolicy(keyYaml(KEY, 'schedule: "0 3 * * 1"'));
});

async function get(
  url: string,
  init: RequestInit = {},
): Promise<{ status: number; type: string | null; text: string }> {
  const response = await fetch(url, init);
  return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
}

describe('/healthz and /readyz', () => {
  it('/healthz is 200 at once; /readyz turns 200 only after every destination passed preflight', async () => {
    const gate = createGate();
    const daemon = await bench.start({
      runtime: {
        wrapBackend: (_name, backend) =>
          wrapBackend(backend, {
            preflight: async (next) => {
              await gate.wait();
              return next();
            },
          }),
      },
    });
    await gate.reached;
    expect((await get(`${daemon.url}/healthz`)).status).toBe(200);
    const starting = await get(`${daemon.url}/readyz`);
    expect(starting.status).toBe(503);
    expect(JSON.parse(starting.text)).toEqual({ status: 'not-ready' });
    gate.open();
    await daemon.idle();
    const ready = await get(`${daemon.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.text)).toEqual({ status: 'ok' });
  });

  it('/readyz is 503 with a status only while a destination fails preflight (the audit names it), and 200 once a sweep finds it fixed', async () => {
    // A regular file where the backend expects its directory: unwritable even for root.
    await writeFile(bench.secretsDir, 'not a directory');
    const daemon = await bench.start();
    await daemon.idle();
    const failing = await get(`${daemon.url}/readyz`);
    expect(failing.status).toBe(503);
    expect(JSON.parse(failing.text)).toEqual({ status: 'not-ready' });
    for (const detail of [KEY, 'files', bench.policyFile, bench.secretsDir, 'KR_'])
      expect(failing.text).not.toContain(detail);
    expect(bench.events('daemon.preflight.failed')).toEqual([
      expect.objectContaining({ backend: 'files', path: `${KEY}.json` }),
    ]);

    await rm(bench.secretsDir);
    await daemon.sweep();
    expect((await get(`${daemon.url}/readyz`)).status).toBe(200);
  });

  it('/readyz is 503 while the backend refuses preflight; /healthz stays 200 and nothing is rolled', async () => {
    const down = new BackendError('KR_BACKEND_UNAVAILABLE', 'injected: backend down', {
      backend: 'files',
      kind: 'file',
      operation: 'preflight',
      path: `${KEY}.json`,
    });
    const daemon = await bench.start({
      runtime: {
        wrapBackend: (_name, backend) => wrapBackend(backend, { preflight: () => Promise.reject(down) }),
      },
    });
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

const withToken = { headers: { authorization: `Bearer ${METRICS_TOKEN}` } };

describe('/metrics', () => {
  it('serves the Prometheus text format with every keyroll metric after a rotation (per-key ones with the token)', async () => {
    const daemon = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await daemon.idle();
    expect(bench.emulator.state.rollCount(KEY)).toBe(1);
    const metrics = await get(`${daemon.url}/metrics`, withToken);
    expect(metrics.status).toBe(200);
    expect(metrics.type).toContain('text/plain');
    expect(metrics.text).toContain('keyroll_rotations_total{result="rotated",reason="scheduled"} 1');
    for (const step of ['preflight', 'lock', 'intent', 'roll', 'verify', 'finish']) {
      expect(metrics.text).toContain(`keyroll_rotation_step_duration_seconds_count{step="${step}"} 1`);
    }
    expect(metrics.text).toContain('keyroll_secret_exposure_window_seconds_count 1');
    expect(metrics.text).toMatch(
      new RegExp(`keyroll_key_last_rotation_timestamp_seconds\\{key_id="${KEY}"\\} \\d+`),
    );
    expect(metrics.text).toContain('keyroll_keys_overdue 0');
    expect(metrics.text).toContain('# TYPE keyroll_alerts_total counter');
    // The first failure of each result, reason and sink must be an increase from 0 to Prometheus.
    expect(metrics.text).toContain('keyroll_rotations_total{result="failed",reason="leak"} 0');
    // The secret's fingerprint is the most that may appear anywhere; here not even that.
    expectNoSecrets([metrics.text], [await bench.storedSecret(KEY)]);
  });

  it('sets the last-rotation time of keys rotated before the daemon started, from backend state', async () => {
    const first = await bench.start();
    await first.idle();
    await first.shutdown();
    const rotatedAt = bench.events('key.succeeded')[0]?.time as string;
    const second = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await second.idle();
    const text = (await get(`${second.url}/metrics`, withToken)).text;
    const match = new RegExp(
      `keyroll_key_last_rotation_timestamp_seconds\\{key_id="${KEY}"\\} (\\d+(?:\\.\\d+)?)`,
    ).exec(text);
    expect(Number(match?.[1])).toBeCloseTo(Date.parse(rotatedAt) / 1000, 0);
    // Nothing rotated by this daemon: every count is still 0.
    expect(text).not.toMatch(/keyroll_rotations_total\{[^}]*\} [1-9]/);
  });
});

describe('/metrics without the token', () => {
  it('lists no key id to a caller without the token, nor to anyone when no token is configured', async () => {
    const withTokenConfigured = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await withTokenConfigured.idle();
    const anonymous = await get(`${withTokenConfigured.url}/metrics`);
    expect(anonymous.status).toBe(200);
    expect(anonymous.text).toContain('keyroll_rotations_total{result="rotated",reason="scheduled"} 1');
    expect(anonymous.text).not.toContain(KEY);
    expect(anonymous.text).not.toContain('key_id');

    const noToken = await bench.start();
    await noToken.idle();
    const asked = await get(`${noToken.url}/metrics`, { headers: { authorization: 'Bearer guess' } });
    expect(asked.status).toBe(200);
    expect(asked.text).not.toContain('key_id');
  });

  it('refuses a wrong token (401) rather than answer with less', async () => {
    const daemon = await bench.start({ metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN' });
    await daemon.idle();
    const wrong = await get(`${daemon.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}x` },
    });
    expect(wrong.status).toBe(401);
    expect(wrong.text).not.toContain(KEY);
  });
});

/** Resolves when the server closes the socket (end or reset). */
function closed(socket: Socket): Promise<string> {
  let received = '';
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1');
  });
  return new Promise((resolve) => {
    socket.on('close', () => {
      resolve(received);
    });
    socket.on('error', () => undefined);
  });
}

function open(url: string): Promise<Socket> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => {
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

describe("the HTTP server's limits", () => {
  // The bound is generous (the daemon's limits here are well under a second); before, node:http
  // swept its connections every 30 s, so these sockets stayed open for about 38 s.
  it(
    'closes a request whose headers never end, a body that never ends, and a connection that sends nothing',
    { timeout: 15_000 },
    async () => {
      const daemon = await bench.start({ http: { headersTimeoutMs: 300, requestTimeoutMs: 600 } });
      await daemon.idle();
      const headers = await open(daemon.url);
      const headersClosed = closed(headers);
      headers.write('GET /healthz HTTP/1.1\r\nHost: keyroll\r\n');
      const body = await open(daemon.url);
      const bodyClosed = closed(body);
      body.write('POST /v1/rotations HTTP/1.1\r\nHost: keyroll\r\nContent-Length: 100\r\n\r\n{"keys":');
      const silent = await open(daemon.url);
      const silentClosed = closed(silent);
      await Promise.all([headersClosed, bodyClosed, silentClosed]);
      expect(headers.destroyed && body.destroyed && silent.destroyed).toBe(true);
    },
  );

  it('closes connections past the cap at once, and serves again when one is freed', async () => {
    const daemon = await bench.start({ http: { maxConnections: 2, keepAliveTimeoutMs: 60_000 } });
    await daemon.idle();
    // Two kept-alive connections that the server has certainly accepted: each got an answer.
    const held = await Promise.all([open(daemon.url), open(daemon.url)]);
    for (const socket of held) {
      const answered = new Promise<void>((resolve) => {
        socket.once('data', () => {
          resolve();
        });
      });
      socket.write('GET /healthz HTTP/1.1\r\nHost: keyroll\r\n\r\n');
      await answered;
    }
    const third = await open(daemon.url);
    const thirdClosed = closed(third);
    third.write('GET /healthz HTTP/1.1\r\nHost: keyroll\r\n\r\n');
    expect(await thirdClosed).toBe('');

    const freed = closed(held[0]);
    held[0].destroy();
    await freed;
    const again = await open(daemon.url);
    const answer = closed(again);
    again.write('GET /healthz HTTP/1.1\r\nHost: keyroll\r\nConnection: close\r\n\r\n');
    expect(await answer).toContain('200 OK');
    held[1].destroy();
  });
});
