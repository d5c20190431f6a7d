// `keyroll run|rotate --pushgateway URL` as child processes: the run's metrics reach a loopback
// stand-in for the Pushgateway once, after the last rotation; a gateway that fails changes
// nothing but a warning in the audit trail.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { TARGETS, eventsNamed, openFileBackend, storedSecret, useCliFixture } from '../cli/harness.ts';

const cli = useCliFixture();
let gateway: Receiver;
beforeEach(async () => {
  gateway = await startReceiver();
});
afterEach(async () => {
  await gateway.close();
});

describe('run --pushgateway', () => {
  it('pushes the run metrics once, grouped by command and shard, after the rotations', async () => {
    await cli.writePolicy();
    const result = await cli.run([
      'run',
      '-p',
      'policy.yaml',
      '--shard',
      '0/1',
      '--pushgateway',
      gateway.url,
    ]);
    expect(result.code).toBe(0);
    expect(gateway.requests).toHaveLength(1);
    const [push] = gateway.requests;
    expect(push?.method).toBe('PUT');
    expect(push?.path).toBe('/metrics/job/keyroll/command/run/shard/0-of-1');
    expect(push?.raw).toContain('keyroll_rotations_total{result="rotated",reason="scheduled"} 3');
    expect(push?.raw).toContain('keyroll_secret_exposure_window_seconds_count 3');
    expect(push?.raw).toMatch(/keyroll_key_last_rotation_timestamp_seconds\{key_id="key_demo_billing"\} \d+/);
    // A one-shot run does not know how many keys are overdue, so it does not claim zero.
    expect(push?.raw).not.toContain('keyroll_keys_overdue');
    expect(eventsNamed(result, 'metrics.push_failed')).toEqual([]);
  });

  it('a scheduled run pushes how many keys are quarantined; rotate leaves the gauge out', async () => {
    await cli.writePolicy();
    const backend = await openFileBackend(cli.secretsDir);
    const at = '2026-01-05T03:00:02.000Z';
    await backend.recordFailure(TARGETS.key_demo_search, {
      rotationId: 'r-5',
      step: 'preflight',
      errorCode: 'KR_BACKEND_DENIED',
      at,
      consecutive: 5,
      firstAt: at,
      quarantinedAt: at,
      lastAlertedAt: at,
    });
    const run = await cli.run(['run', '-p', 'policy.yaml', '--pushgateway', gateway.url]);
    expect(run.lastLine).toBe('rotated 2, failed 0, skipped 1');
    expect(gateway.requests[0]?.raw).toContain('keyroll_keys_quarantined 1');
    const rotate = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--force',
      '--pushgateway',
      gateway.url,
    ]);
    expect(rotate.code).toBe(0);
    expect(gateway.requests[1]?.raw).not.toContain('keyroll_keys_quarantined');
  });

  it('rotate --leaked-secret-stdin pushes the time to dead of the leaked value and each key maxAge beside its last rotation', async () => {
    await cli.writePolicy();
    expect((await cli.run(['run', '-p', 'policy.yaml'])).code).toBe(0);
    const leaked = await storedSecret(cli.secretsDir, 'key_demo_billing');
    const result = await cli.run(
      [
        'rotate',
        '-p',
        'policy.yaml',
        '--leaked-secret-stdin',
        '--reason',
        'leak',
        '--actor',
        'alice',
        '--pushgateway',
        gateway.url,
      ],
      { stdin: `${leaked}\n` },
    );
    expect(result.code, result.stderr).toBe(0);
    const [push] = gateway.requests;
    expect(push?.path).toBe('/metrics/job/keyroll/command/rotate');
    expect(push?.raw).toContain('keyroll_rotations_total{result="rotated",reason="leak"} 1');
    expect(push?.raw).toContain('keyroll_leak_time_to_dead_seconds_count 1');
    // billing has a 7-day maxAge.
    expect(push?.raw).toContain('keyroll_key_max_age_seconds{key_id="key_demo_billing"} 604800');
    expect(push?.raw).not.toMatch(/keyroll_keys_(drifted|locked)/);
  });

  it('a failing gateway is a warning in the audit trail; the exit code still reports the rotations', async () => {
    await cli.writePolicy();
    gateway.answer(503);
    const result = await cli.run(['run', '-p', 'policy.yaml', '--pushgateway', gateway.url]);
    expect(result.code).toBe(0);
    expect(result.lastLine).toBe('rotated 3, failed 0, skipped 0');
    expect(eventsNamed(result, 'metrics.push_failed')).toEqual([
      expect.objectContaining({
        level: 'warn',
        errorCode: 'KR_METRICS_PUSH_FAILED',
        status: 503,
        gateway: gateway.url,
        job: 'keyroll',
      }),
    ]);
  });

  it('a --pushgateway that is not an http(s) URL is a usage error (exit 2) before anything rotates', async () => {
    await cli.writePolicy();
    const result = await cli.run(['run', '-p', 'policy.yaml', '--pushgateway', 'pushgateway:9091']);
    expect(result.code).toBe(2);
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});

describe('run --pushgateway-auth and plain http', () => {
  it('sends the credentials a reference names as the Authorization header, never on the command line', async () => {
    await cli.writePolicy();
    cli.alsoSecret('gw-pass-from-env');
    const result = await cli.run(
      ['run', '-p', 'policy.yaml', '--pushgateway', gateway.url, '--pushgateway-auth', 'env:GW_AUTH'],
      { env: { GW_AUTH: 'ops:gw-pass-from-env' } },
    );
    expect(result.code).toBe(0);
    expect(gateway.requests[0]?.headers.authorization).toBe(
      `Basic ${Buffer.from('ops:gw-pass-from-env').toString('base64')}`,
    );
    expect(result.stdout + result.stderr).not.toContain('gw-pass-from-env');
  });

  it('a --pushgateway over plain http:// to another machine is a usage error (exit 2) before anything rotates', async () => {
    await cli.writePolicy();
    const result = await cli.run([
      'run',
      '-p',
      'policy.yaml',
      '--pushgateway',
      'http://pushgateway.example.com:9091',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('--pushgateway-allow-insecure-http');
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});

describe('rotate --pushgateway', () => {
  it('labels the rotations with the reason given and groups the push under command=rotate', async () => {
    await cli.writePolicy();
    const result = await cli.run([
      'rotate',
      '-p',
      'policy.yaml',
      '--key',
      'key_demo_billing',
      '--reason',
      'leak',
      '--actor',
      'alice',
      '--pushgateway',
      gateway.url,
    ]);
    expect(result.code).toBe(0);
    expect(gateway.requests.map((r) => r.path)).toEqual(['/metrics/job/keyroll/command/rotate']);
    expect(gateway.requests[0]?.raw).toContain('keyroll_rotations_total{result="rotated",reason="leak"} 1');
  });
});
