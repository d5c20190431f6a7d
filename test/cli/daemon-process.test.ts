// `keyroll daemon` as an operator runs it: bin/keyroll as a child process against the in-process
// emulator and a file backend (test/cli/harness.ts), stopped and reloaded with real signals.
import { setTimeout as sleep } from 'node:timers/promises';
import { beforeEach, describe, expect, it } from 'vitest';
import {
  eventsNamed,
  nextEvent,
  openFileBackend,
  policyYaml,
  storedSecret,
  TARGETS,
  useCliFixture,
  type RunningCli,
} from './harness.ts';

// The emulator's `delay` fault waits on this gate, so the test decides when the delayed roll answers.
let delayReached = Promise.withResolvers<undefined>();
let delayRelease = Promise.withResolvers<undefined>();
const cli = useCliFixture({
  sleep: async () => {
    delayReached.resolve(undefined);
    await delayRelease.promise;
  },
});
beforeEach(() => {
  delayReached = Promise.withResolvers();
  delayRelease = Promise.withResolvers();
});

const BILLING = 'key_demo_billing';

function spawnDaemon(extra: string[] = [], env: Record<string, string> = {}): RunningCli {
  // The standard policy's three keys were never rotated by keyroll: the first sweep rotates them, one at a time.
  return cli.spawn(
    ['daemon', '-p', 'policy.yaml', '--listen', '127.0.0.1:0', '--concurrency', '1', ...extra],
    { viaBin: true, env },
  );
}

describe('keyroll daemon: SIGTERM', () => {
  it('during a roll: the rolled key finishes its store, nothing new starts, exit 0, the stored secret is live', async () => {
    await cli.writePolicy();
    cli.emulator.faults.inject('roll', { kind: 'delay', ms: 60_000 });
    const running = spawnDaemon();
    await delayReached.promise;
    // billing's roll is at the API: stop the daemon now, then let the roll answer.
    running.child.kill('SIGTERM');
    await running.stderrIncludes('SIGTERM received');
    delayRelease.resolve(undefined);
    const result = await running.result;

    expect(result.code).toBe(0);
    expect(cli.emulator.state.rollCount(BILLING)).toBe(1);
    expect(cli.emulator.state.isLiveSecret(BILLING, await storedSecret(cli.secretsDir, BILLING))).toBe(true);
    expect(cli.emulator.state.rollCount('key_demo_search')).toBe(0);
    expect(cli.emulator.state.rollCount('key_demo_ingest')).toBe(0);
    const order = result.events.map((e) => e.event);
    expect(order.indexOf('daemon.stopping')).toBeLessThan(order.indexOf('key.stored'));
    expect(eventsNamed(result, 'daemon.stopping')).toEqual([
      expect.objectContaining({ signal: 'SIGTERM', inFlight: [BILLING] }),
    ]);
    expect(eventsNamed(result, 'daemon.stopped')).toEqual([
      expect.objectContaining({ exitCode: 0, unfinished: [] }),
    ]);
    expect(
      (await (await openFileBackend(cli.secretsDir)).readState(TARGETS[BILLING])).intent,
    ).toBeUndefined();
  });

  it('when the grace ends first: exit 3 with the key named, its intent marker kept, and the next run repairs it', async () => {
    // A short lock TTL, so the repairing run may take over the dead daemon's lock within the test;
    // validate accepts it only above one roll attempt (the API timeouts) plus the write and the
    // clock skew, so those are shortened with it.
    const policy = policyYaml({ baseUrl: cli.emulator.url, alertUrl: `${cli.receiver.url}/alerts` })
      .replace(
        '  rateLimitPerMinute: 6000\n',
        '  rateLimitPerMinute: 6000\n  timeouts: { headersMs: 500, bodyMs: 500 }\n',
      )
      .replace(
        '  minInterval: 1h\n',
        '  minInterval: 1h\n  lockTtl: 2s\n  clockSkew: 100ms\n  store: { attempts: 1 }\n',
      );
    await cli.writeFile('policy.yaml', policy);
    cli.emulator.faults.inject('roll', { kind: 'delay', ms: 60_000 });
    const running = spawnDaemon(['--grace', '200ms']);
    await delayReached.promise;
    running.child.kill('SIGTERM');
    const result = await running.result;
    expect(result.code).toBe(3);
    expect(eventsNamed(result, 'daemon.grace_expired')).toEqual([
      expect.objectContaining({ inFlight: [BILLING], graceMs: 200 }),
    ]);
    // The roll answers after the process is gone: the API minted a secret nobody stored.
    delayRelease.resolve(undefined);
    await expect.poll(() => cli.emulator.state.rollCount(BILLING)).toBe(1);
    const left = await (await openFileBackend(cli.secretsDir)).readState(TARGETS[BILLING]);
    expect(left.intent).toBeDefined();
    // Invariant 5: the dead daemon's lock is taken over only once it has expired, plus clockSkew.
    const expiresAt = Date.parse(left.lock?.expiresAt ?? '');
    await sleep(Math.max(0, expiresAt - Date.now() + 100 + 50));

    const repair = await cli.run(['run', '-p', 'policy.yaml']);
    expect(repair.code).toBe(0);
    expect(eventsNamed(repair, 'key.recovered')).toEqual([
      expect.objectContaining({ keyId: BILLING, result: 'rerolled' }),
    ]);
    expect(cli.emulator.state.isLiveSecret(BILLING, await storedSecret(cli.secretsDir, BILLING))).toBe(true);
  });
});

describe('keyroll daemon: SIGHUP', () => {
  it('an invalid policy is refused with file:line, alerted, and the daemon keeps running on the old one', async () => {
    await cli.writePolicy();
    const running = spawnDaemon();
    await nextEvent(running, 'run.finished');
    await cli.writeFile('policy.yaml', 'version: 1\nkeys: [\n');
    const failed = nextEvent(running, 'policy.reload_failed');
    running.child.kill('SIGHUP');
    expect(await failed).toMatchObject({
      errorCode: 'KR_POLICY_SYNTAX',
      error: expect.stringMatching(/policy\.yaml:\d+/) as unknown,
    });
    await expect.poll(() => cli.receiver.requests.length).toBe(1);
    expect(cli.receiver.requests[0]?.body).toMatchObject({ step: 'reload', errorCode: 'KR_POLICY_SYNTAX' });

    running.child.kill('SIGTERM');
    const result = await running.result;
    expect(result.code).toBe(0);
    expect(eventsNamed(result, 'policy.reloaded')).toEqual([]);
  });
});

describe('keyroll daemon: the trigger from the command line', () => {
  it('--trigger-key and --state-dir enable the trigger with its callers and a new replay record', async () => {
    await cli.writePolicy();
    const running = spawnDaemon(
      ['--trigger-key', 'alice=env:KEYROLL_TRIGGER_KEY_ALICE', '--state-dir', 'daemon-state'],
      { KEYROLL_TRIGGER_KEY_ALICE: 'alice-trigger-key-for-the-cli-test-0123456789' },
    );
    expect(await nextEvent(running, 'daemon.started')).toMatchObject({
      trigger: 'enabled',
      callers: ['alice'],
      replayRecord: 'new',
      metrics: 'aggregate only',
    });
    running.child.kill('SIGTERM');
    expect((await running.result).code).toBe(0);
  });
});

describe('keyroll daemon: start-up errors', () => {
  it('exits 2 on a bad --listen, --grace, --trigger-key, --metrics-token or --keys-from, or the retired --trigger-secret, before touching anything', async () => {
    await cli.writePolicy();
    for (const args of [
      ['--listen', 'nowhere'],
      ['--grace', '30'],
      ['--trigger-key', 'alice=literal-secret-value'],
      ['--trigger-key', 'env:KEYROLL_TRIGGER_KEY'],
      ['--metrics-token', 'literal-token-value'],
      ['--trigger-secret', 'env:KEYROLL_TRIGGER_SECRET'],
      ['--concurrency', '0'],
      ['--keys-from', 'etcd'],
      // Objects mode needs keyroll's own namespace (no POD_NAMESPACE, no service account here).
      ['--keys-from', 'kubernetes'],
    ]) {
      const result = await cli.run(['daemon', '-p', 'policy.yaml', ...args]);
      expect(result.code, args.join(' ')).toBe(2);
      expect(result.stdout, args.join(' ')).toBe('');
    }
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });

  it('exits 2 when a trigger key reference cannot be read', async () => {
    await cli.writePolicy();
    const result = await cli.run([
      'daemon',
      '-p',
      'policy.yaml',
      '--listen',
      '127.0.0.1:0',
      '--state-dir',
      'state',
      '--trigger-key',
      'alice=env:KEYROLL_NOT_SET',
    ]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain('KEYROLL_NOT_SET');
    expect(cli.emulator.state.totalRolls()).toBe(0);
  });
});
