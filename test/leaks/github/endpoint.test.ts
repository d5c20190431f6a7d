// POST /v1/leaks/github: the sender is verified before anything else, deliveries are not
// replayed, alerts that match no key stay open, alertOnly keys are alerted and not rotated, and
// several alerts for one key while its leak rotation runs become one rotation.
import { randomBytes, randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import type { Backend } from '../../../src/backends/types.ts';
import { wrapBackend } from '../../rotation/harness.ts';
import { createGate, keyYaml, postTrigger, type DaemonBench } from '../../support/daemon-bench.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';
import { waitFor } from '../../support/wait-for.ts';
import { secretScanningWebhook, type FakeGithub } from '../../support/fake-github.ts';
import {
  BILLING,
  deliver,
  intakePolicy,
  startWithIntake,
  storeFirstSecret,
  useGithubBench,
} from './support.ts';

const benches = useGithubBench();
let bench: DaemonBench;
let github: FakeGithub;

beforeEach(() => {
  bench = benches.bench();
  github = benches.github();
});

const webhook = (number: number, repo = 'billing-app') =>
  secretScanningWebhook('created', { owner: 'octo-org', repo, number });

describe('POST /v1/leaks/github', () => {
  it('refuses a delivery signed with another secret before reading it (401, GitHub never called)', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const answer = await deliver(daemon, webhook(1), { secret: 'not-the-webhook-secret' });
    expect(answer.status).toBe(401);
    expect(answer.json).toMatchObject({ error: { code: 'bad-signature' } });
    const missing = await deliver(daemon, webhook(1), { signature: '' });
    expect(missing.status).toBe(401);
    await daemon.idle();
    expect(github.requests).toEqual([]);
    expect(bench.events('trigger.rejected').map((event) => event.details)).toEqual([
      { endpoint: '/v1/leaks/github' },
      { endpoint: '/v1/leaks/github' },
    ]);
    expect(bench.events('leak.intake.accepted')).toEqual([]);
  });

  it('answers 404 when the policy enables no GitHub intake', async () => {
    await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 3 * * 1"'));
    const daemon = await bench.start();
    expect((await deliver(daemon, webhook(1))).status).toBe(404);
  });

  it('refuses a body over its cap with 413', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const answer = await deliver(daemon, { ...webhook(1), padding: 'x'.repeat(600 * 1024) });
    expect(answer.status).toBe(413);
  });

  it('refuses a delivery it already received (409), also after a restart', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const first = await startWithIntake(bench, github);
    github.addAlert({
      owner: 'octo-org',
      repo: 'billing-app',
      number: 7,
      state: 'resolved',
      secret: `kmk_live_${randomBytes(30).toString('base64url')}`,
    });
    const delivery = randomUUID();
    expect((await deliver(first, webhook(7), { delivery })).status).toBe(202);
    expect((await deliver(first, webhook(7), { delivery })).status).toBe(409);
    await first.shutdown();
    const second = await startWithIntake(bench, github);
    expect((await deliver(second, webhook(7), { delivery })).status).toBe(409);
    await second.idle();
    // The alert was no longer open on GitHub: nothing to rotate.
    expect(bench.events('leak.intake.ignored').map((event) => event.why)).toEqual(['alert-not-open']);
  });

  it('ignores actions that need no rotation and answers ping', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const resolved = await deliver(
      daemon,
      secretScanningWebhook('resolved', { owner: 'octo-org', repo: 'billing-app', number: 3 }),
    );
    expect(resolved).toMatchObject({ status: 202, json: { ignored: true } });
    expect((await deliver(daemon, { zen: 'Keep it logically awesome.' }, { event: 'ping' })).status).toBe(
      200,
    );
    await daemon.idle();
    expect(github.requests).toEqual([]);
  });

  it('leaves an alert whose secret matches no key open, audited', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    await storeFirstSecret(bench, daemon, BILLING);
    const foreign = `kmk_live_${randomBytes(30).toString('base64url')}`;
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 9, state: 'open', secret: foreign });
    expect((await deliver(daemon, webhook(9))).status).toBe(202);
    await waitFor(() => bench.events('leak.unmatched').length === 1, 'leak.unmatched');
    await daemon.idle();
    expect(github.requests.map((request) => request.method)).toEqual(['GET']);
    expect(github.alerts.get('octo-org/billing-app#9')?.state).toBe('open');
    expect(bench.events('key.rolled')).toHaveLength(1);
    expectNoSecrets([JSON.stringify(bench.audit.lines)], [foreign]);
  });

  it('an unmatched alert while some destination could not be read is alerted, not only audited, and stays open', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    let failReads = false;
    const daemon = await startWithIntake(bench, github, {
      runtime: {
        wrapBackend: (_name: string, backend: Backend): Backend =>
          wrapBackend(backend, {
            readSecret: (next) =>
              failReads ? Promise.reject(new Error('injected: destination unreadable')) : next(),
          }),
      },
    });
    await storeFirstSecret(bench, daemon, BILLING);
    failReads = true;
    const foreign = `kmk_live_${randomBytes(30).toString('base64url')}`;
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 10, state: 'open', secret: foreign });
    expect((await deliver(daemon, webhook(10))).status).toBe(202);
    await waitFor(() => bench.events('leak.intake.failed').length === 1, 'leak.intake.failed');
    await daemon.idle();
    expect(
      bench.alerter.alerts.some(
        ({ alert }) => alert.step === 'leak-intake' && alert.details?.intakeStep === 'identify',
      ),
    ).toBe(true);
    expect(github.alerts.get('octo-org/billing-app#10')?.state).toBe('open');
    expectNoSecrets([JSON.stringify(bench.audit.lines)], [foreign]);
  });

  it('alerts about a leak of an alertOnly key and rotates nothing', async () => {
    await bench.writePolicyText(intakePolicy(bench, github, undefined, `  alertOnly: [${BILLING}]\n`));
    const daemon = await startWithIntake(bench, github);
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 11, state: 'open', secret: leaked });
    expect((await deliver(daemon, webhook(11))).status).toBe(202);
    await waitFor(() => bench.events('leak.intake.alert_only').length === 1, 'leak.intake.alert_only');
    await daemon.idle();
    expect(await bench.storedSecret(BILLING)).toBe(leaked);
    expect(
      bench.alerter.alerts
        .map((sent) => sent.alert)
        .filter((alert) => alert.errorCode === 'KR_LEAK_ALERT_ONLY'),
    ).toMatchObject([{ severity: 'critical', keyId: BILLING }]);
    expect(github.alerts.get('octo-org/billing-app#11')?.state).toBe('open');
  });

  it('coalesces two alerts for one key that arrive while its leak rotation runs into one rotation', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const gate = createGate();
    let writes = 0;
    const daemon = await startWithIntake(bench, github, {
      runtime: {
        // The leak rotation's store (the second write of the key) waits until the second alert joined.
        wrapBackend: (_name: string, backend: Backend): Backend =>
          wrapBackend(backend, {
            writeSecret: async (next) => {
              writes += 1;
              if (writes === 2) await gate.wait();
              return next();
            },
          }),
      },
    });
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 21, state: 'open', secret: leaked });
    github.addAlert({ owner: 'octo-org', repo: 'billing-docs', number: 5, state: 'open', secret: leaked });
    expect((await deliver(daemon, webhook(21))).status).toBe(202);
    await gate.reached;
    expect((await deliver(daemon, webhook(5, 'billing-docs'))).status).toBe(202);
    await waitFor(() => bench.events('leak.intake.coalesced').length === 1, 'leak.intake.coalesced');
    gate.open();
    const [first, second] = await Promise.all([
      github.patched('octo-org', 'billing-app', 21),
      github.patched('octo-org', 'billing-docs', 5),
    ]);
    await daemon.idle();
    const leakRolls = bench.events('key.rolled').filter((event) => event.reason === 'leak');
    expect(leakRolls).toHaveLength(1);
    const rotationId = leakRolls[0]?.rotationId as string;
    expect((JSON.parse(first.body) as { resolution_comment: string }).resolution_comment).toContain(
      rotationId,
    );
    expect((JSON.parse(second.body) as { resolution_comment: string }).resolution_comment).toContain(
      rotationId,
    );
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
  });

  it('an alert whose value is only the previous one, already dead, rolls nothing and is resolved (the same decision as rotate --leaked-secret-stdin)', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const old = await storeFirstSecret(bench, daemon, BILLING);
    await postTrigger(daemon, { body: JSON.stringify({ keys: [BILLING], reason: 'leak' }) });
    await daemon.idle();
    const rolls = bench.emulator.state.rollCount(BILLING);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 31, state: 'open', secret: old });
    expect((await deliver(daemon, webhook(31))).status).toBe(202);
    const patch = await github.patched('octo-org', 'billing-app', 31);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(rolls);
    expect(bench.events('leak.proven-dead')).toEqual([
      expect.objectContaining({ keyId: BILLING, status: 401 }),
    ]);
    expect((JSON.parse(patch.body) as { resolution_comment: string }).resolution_comment).toContain(
      'already rotated away',
    );
  });
});
