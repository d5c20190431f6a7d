// The whole GitHub way in, against a loopback GitHub held to GitHub's published shapes and the
// emulator: webhook -> fetch the alert -> identify -> roll -> store -> the leaked value refused
// (401) -> the alert resolved as revoked naming the rotation; and no output carries the leaked
// or the new value.
import { beforeEach, describe, expect, it } from 'vitest';
import type { DaemonBench } from '../../support/daemon-bench.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';
import { secretScanningWebhook, type FakeGithub } from '../../support/fake-github.ts';
import {
  BILLING,
  deliver,
  GITHUB_WEBHOOK_SECRET,
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

describe('GitHub secret scanning intake, end to end', () => {
  it('rotates the leaked key, proves the leaked value dead, resolves the alert, and leaks neither value', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(true);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 42, state: 'open', secret: leaked });

    const answer = await deliver(
      daemon,
      secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number: 42 }),
    );
    expect(answer.status).toBe(202);
    const patch = await github.patched('octo-org', 'billing-app', 42);
    await daemon.idle();

    // Rolled and stored: the destination holds a new, live value; the leaked one is dead.
    const fresh = await bench.storedSecret(BILLING);
    expect(fresh).not.toBe(leaked);
    expect(bench.emulator.state.isLiveSecret(BILLING, fresh)).toBe(true);
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
    const proven = bench.events('leak.proven-dead');
    expect(proven).toHaveLength(1);
    expect(proven[0]).toMatchObject({ keyId: BILLING, status: 401, actor: 'github:octo-org/billing-app#42' });
    // keyroll_leak_time_to_dead_seconds: one leaked value killed by this report's rotation.
    expect(
      await daemon.metrics.registry.getSingleMetricAsString('keyroll_leak_time_to_dead_seconds'),
    ).toContain('keyroll_leak_time_to_dead_seconds_count 1');

    // The rotation was a leak rotation by the alert, and the alert names it.
    const succeeded = bench.events('key.succeeded').filter((event) => event.reason === 'leak');
    expect(succeeded).toHaveLength(1);
    expect(succeeded[0]).toMatchObject({ keyId: BILLING, actor: 'github:octo-org/billing-app#42' });
    const rotationId = succeeded[0]?.rotationId as string;
    expect(JSON.parse(patch.body)).toEqual({
      state: 'resolved',
      resolution: 'revoked',
      resolution_comment: expect.stringContaining(rotationId) as unknown,
    });
    expect(github.alerts.get('octo-org/billing-app#42')?.state).toBe('resolved');
    expect(bench.events('leak.intake.resolved')[0]).toMatchObject({
      alert: 'octo-org/billing-app#42',
      resolution: 'revoked',
      keys: [{ keyId: BILLING, rotationId, result: 'rotated' }],
    });

    // keyroll called GitHub twice, with the token, the API version and GitHub's shapes.
    expect(github.requests.map((request) => `${request.method} ${request.url}`)).toEqual([
      'GET /repos/octo-org/billing-app/secret-scanning/alerts/42',
      'PATCH /repos/octo-org/billing-app/secret-scanning/alerts/42',
    ]);
    expect(github.requests[0]?.headers['x-github-api-version']).toBe('2022-11-28');
    expect(github.schemaProblems).toEqual([]);

    // Invariant 3: neither value in audit lines, alerts, or what GitHub received; nor the
    // webhook secret or the token in audit lines and alerts.
    const received = github.requests.map((request) => JSON.stringify(request));
    expectNoSecrets(
      [...bench.audit.lines, ...bench.alerter.alerts.map((alert) => JSON.stringify(alert)), ...received],
      [leaked, fresh],
    );
    expectNoSecrets(
      [...bench.audit.lines, ...bench.alerter.alerts.map((alert) => JSON.stringify(alert))],
      [GITHUB_WEBHOOK_SECRET, github.token],
    );
  });
});
