// How `rotate` stops: keyroll's credential refused on roll (401, exit 3), an API key configured
// as keyroll's credential (403 on roll, exit 1, explained), and SIGTERM while a roll is in
// flight (the in-flight key finishes its store, the rest are not started, exit 3), and SIGTERM
// while an alert sink drips its answer (the delivery is abandoned, exit 3, promptly).
import { beforeEach, describe, expect, it, vi } from 'vitest';
import {
  createDelayGate,
  eventsNamed,
  openFileBackend,
  policyYaml,
  storedSecret,
  TARGETS,
  useCliFixture,
  type CliResult,
  type RunningCli,
} from './harness.ts';

// The emulator's `delay` fault waits on this gate, so the test decides when the delayed roll answers.
const gate = createDelayGate();
const cli = useCliFixture({ sleep: gate.sleep });
beforeEach(() => {
  gate.reset();
});

const ROTATE_ALL = [
  'rotate',
  '-p',
  'policy.yaml',
  '--all',
  '--reason',
  'leak',
  '--actor',
  'alice',
  '--ticket',
  'INC-9',
  '--concurrency',
  '1',
];

function alertBodies(): Record<string, unknown>[] {
  return cli.receiver.requests.map((r) => r.body as Record<string, unknown>);
}

describe('keyroll rotate: a 401 on roll', () => {
  async function rotateWithRollRefused(): Promise<CliResult> {
    await cli.writePolicy();
    // The credential check (a project list) passes; the roll itself is refused.
    cli.emulator.faults.inject('roll', { kind: 'status', status: 401 });
    return cli.run(ROTATE_ALL);
  }

  it('aborts the run (exit 3) before any further roll, clears the unrolled intent and alerts critically', async () => {
    const result = await rotateWithRollRefused();
    expect(result.code).toBe(3);
    expect(result.lastLine).toMatch(/^rotated 0, failed 0, skipped 3 \(aborted: .*refused \(401\).*\)$/);
    expect(cli.emulator.state.totalRolls()).toBe(0);
    expect(cli.emulator.state.callCount('roll')).toBe(1);
    expect(eventsNamed(result, 'run.aborted')).toEqual([
      expect.objectContaining({ why: 'credential-refused', actor: 'alice', reason: 'leak' }),
    ]);
    expect(
      (await (await openFileBackend(cli.secretsDir)).readState(TARGETS.key_demo_billing)).intent,
    ).toBeUndefined();
    expect(alertBodies()).toEqual([
      expect.objectContaining({ severity: 'critical', errorCode: 'KR_RUN_CREDENTIAL_REFUSED' }),
    ]);
  });

  // Known gap, reported to the lead: the roll-time 401 message (src/rotation/roll.ts) does not say
  // which credential was refused, unlike the pre-run check. Flip to `it` once it does.
  it('names the credential reference that was refused', async () => {
    const result = await rotateWithRollRefused();
    expect(result.lastLine).toContain('env:KEYROLL_API_TOKEN');
  });
});

describe('keyroll rotate: an API key configured as keyroll credential', () => {
  it('is recognised from the 403 on roll: the key fails (exit 1) with an explanation, nothing is rolled', async () => {
    await cli.writePolicy();
    const apiKeySecret = cli.emulator.state.currentSecret('key_demo_legacy');
    cli.alsoSecret(apiKeySecret);
    const result = await cli.run(
      ['rotate', '-p', 'policy.yaml', '--key', 'key_demo_billing', '--reason', 'leak', '--actor', 'alice'],
      { env: { KEYROLL_API_TOKEN: apiKeySecret } },
    );
    expect(result.code).toBe(1);
    expect(result.lastLine).toBe('rotated 0, failed 1, skipped 0');
    const [failed] = eventsNamed(result, 'key.failed');
    expect(failed).toMatchObject({ keyId: 'key_demo_billing', step: 'roll', errorCode: 'KR_API_FORBIDDEN' });
    expect(failed?.error).toContain('an organization API key can never roll keys');
    expect(alertBodies()).toEqual([
      expect.objectContaining({
        keyId: 'key_demo_billing',
        errorCode: 'KR_API_FORBIDDEN',
        summary: expect.stringContaining('API key can never roll keys') as unknown,
      }),
    ]);
    expect(cli.emulator.state.totalRolls()).toBe(0);
    expect(
      (await (await openFileBackend(cli.secretsDir)).readState(TARGETS.key_demo_billing)).intent,
    ).toBeUndefined();
  });
});

describe('keyroll rotate: the reader of stdout goes away', () => {
  // Known gap, reported to the lead: with stdout closed (`keyroll rotate … | head -1`), the first
  // audit write raises EPIPE as an unhandled 'error' event and the process dies with a stack
  // trace and exit 1, at whatever step it was in, possibly between roll and store. Flip to `it`
  // once stdout errors are handled (e.g. treated like SIGTERM: finish in-flight stores, exit 3).
  it('ends with a keyroll exit code, no crash, and no key left mid-rotation', async () => {
    await cli.writePolicy();
    const running = cli.spawn(ROTATE_ALL);
    // Closed before the child has even loaded: its first audit line meets a broken pipe.
    running.child.stdout?.destroy();
    const result = await running.result;
    expect(result.stderr).not.toContain("Unhandled 'error' event");
    expect([0, 3]).toContain(result.code);
    const backend = await openFileBackend(cli.secretsDir);
    for (const target of Object.values(TARGETS))
      expect((await backend.readState(target)).intent).toBeUndefined();
  });
});

describe('keyroll rotate: SIGTERM during a leak rotation', () => {
  async function terminateDuringFirstRoll(): Promise<CliResult> {
    await cli.writePolicy();
    cli.emulator.faults.inject('roll', { kind: 'delay', ms: 60_000 });
    const running = cli.spawn(ROTATE_ALL);
    await gate.reached();
    // The first key's roll is at the API: stop the process now, then let the roll answer.
    running.child.kill('SIGTERM');
    await running.stderrIncludes('SIGTERM received');
    gate.release();
    return running.result;
  }

  it('lets the in-flight key finish its store, starts no other key, and exits 3', async () => {
    const result = await terminateDuringFirstRoll();
    expect(result.code).toBe(3);
    expect(result.lastLine).toBe(
      'rotated 1, failed 0, skipped 2 (aborted: shutdown before every key was handled)',
    );
    expect(eventsNamed(result, 'key.stored')).toEqual([
      expect.objectContaining({ keyId: 'key_demo_billing' }),
    ]);
    expect(eventsNamed(result, 'key.succeeded').map((e) => e.keyId)).toEqual(['key_demo_billing']);
    expect(
      cli.emulator.state.isLiveSecret(
        'key_demo_billing',
        await storedSecret(cli.secretsDir, 'key_demo_billing'),
      ),
    ).toBe(true);
    expect(cli.emulator.state.rollCount('key_demo_search')).toBe(0);
    expect(cli.emulator.state.rollCount('key_demo_ingest')).toBe(0);
    expect(eventsNamed(result, 'run.aborted')).toEqual([expect.objectContaining({ why: 'shutdown' })]);
    expect(eventsNamed(result, 'run.finished')).toEqual([
      expect.objectContaining({ rotated: 1, skipped: 2, exitCode: 3 }),
    ]);
    expect(alertBodies()).toEqual([
      expect.objectContaining({ severity: 'warning', errorCode: 'KR_RUN_SHUTDOWN' }),
    ]);
  });

  // Known gap, reported to the lead: keys never started because of the shutdown appear only as a
  // count in run.finished; no audit line names them (src/rotation/run.ts). Flip to `it` once
  // they get one (e.g. key.skipped with why "aborted").
  it('names every key left unrotated in the audit trail', async () => {
    const result = await terminateDuringFirstRoll();
    for (const id of ['key_demo_search', 'key_demo_ingest']) {
      expect(result.events.some((e) => e.keyId === id)).toBe(true);
    }
  });
});

describe('keyroll rotate: SIGTERM while an alert sink holds the delivery', () => {
  // Far longer than the bound below: nothing but SIGTERM can end this delivery in time.
  const EXIT_BOUND_MS = 20_000;

  async function exitWithin(running: RunningCli, ms: number): Promise<CliResult | 'still running'> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'still running'>((resolve) => {
      timer = setTimeout(() => {
        resolve('still running');
      }, ms);
    });
    const outcome = await Promise.race([running.result, late]);
    clearTimeout(timer);
    if (outcome === 'still running') {
      running.child.kill('SIGKILL');
      await running.result;
    }
    return outcome;
  }

  it(
    'abandons the delivery, audits the alert as undelivered and exits 3 within the bound',
    { timeout: 60_000 },
    async () => {
      const alertUrl = `${cli.receiver.url}/alerts`;
      const policy = policyYaml({ baseUrl: cli.emulator.url, alertUrl }).replace(
        `url: "${alertUrl}" }`,
        `url: "${alertUrl}", timeoutMs: 120000, deadlineMs: 120000 }`,
      );
      expect(policy).toContain('deadlineMs: 120000');
      await cli.writeFile('policy.yaml', policy);
      // The key fails at once (404 on roll); its alert meets a receiver that answers 400 and then
      // drips its body one byte a second, forever.
      cli.emulator.faults.inject('roll', { kind: 'status', status: 404 });
      cli.receiver.answer({ status: 400, dripMs: 1_000 });
      const running = cli.spawn([
        'rotate',
        '-p',
        'policy.yaml',
        '--key',
        'key_demo_billing',
        '--reason',
        'leak',
        '--actor',
        'alice',
      ]);
      await vi.waitFor(
        () => {
          expect(cli.receiver.requests).toHaveLength(1);
        },
        { timeout: 15_000, interval: 50 },
      );

      running.child.kill('SIGTERM');
      const result = await exitWithin(running, EXIT_BOUND_MS);

      expect(result).not.toBe('still running');
      if (result === 'still running') return;
      expect(result.code).toBe(3);
      expect(result.lastLine).toBe(
        'rotated 0, failed 1, skipped 0 (aborted: SIGTERM received before the run finished)',
      );
      expect(eventsNamed(result, 'alert.undeliverable')).toEqual([
        expect.objectContaining({ keyId: 'key_demo_billing', sink: 'hook', errorCode: 'KR_ALERT_ABORTED' }),
      ]);
      expect(eventsNamed(result, 'alert.sent')).toEqual([]);
    },
  );
});
