// The GitHub reconcile (invariant 13): the daemon lists the open alerts itself and handles those
// no webhook delivery brought, through the webhook's own path, against the loopback GitHub (list
// endpoints with cursor pages, ETags and rate-limit headers) and the emulator.
import { beforeEach, describe, expect, it } from 'vitest';
import type { Daemon } from '../../../src/daemon/daemon.ts';
import type { DaemonBench } from '../../support/daemon-bench.ts';
import { keyYaml, postTrigger } from '../../support/daemon-bench.ts';
import { expectNoSecrets } from '../../support/secret-scan.ts';
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

const KEYS = keyYaml(BILLING, 'schedule: "0 3 * * 1"');
const RECONCILE = (interval = '1h'): string => `    organizations: [octo-org]
    secretTypes: [keyroll_api_key]
    reconcileInterval: ${interval}
`;

const listRequests = (): string[] =>
  github.requests
    .filter((r) => r.method === 'GET' && /\/secret-scanning\/alerts\?/.test(r.url))
    .map((r) => r.url);

/** A daemon without the reconcile stores the key's first secret, and stops: what leaks next, no delivery brings. */
async function storeWhileNoReconcile(): Promise<string> {
  await bench.writePolicyText(intakePolicy(bench, github, KEYS));
  const first = await startWithIntake(bench, github);
  const leaked = await storeFirstSecret(bench, first, BILLING);
  await first.shutdown();
  return leaked;
}

async function startReconciling(interval?: string): Promise<Daemon> {
  await bench.writePolicyText(intakePolicy(bench, github, KEYS, RECONCILE(interval)));
  return startWithIntake(bench, github);
}

function expectNoLeak(values: string[]): void {
  const outputs = [
    ...bench.audit.lines,
    ...bench.alerter.alerts.map((alert) => JSON.stringify(alert)),
    ...github.requests.map((request) => JSON.stringify(request)),
  ];
  expectNoSecrets(outputs, values);
}

describe('GitHub reconcile: an alert no delivery brought', () => {
  it('is found by the reconcile at start, rotated once, proven dead and resolved', async () => {
    const leaked = await storeWhileNoReconcile();
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 42, state: 'open', secret: leaked });
    const rollsBefore = bench.emulator.state.rollCount(BILLING);

    const daemon = await startReconciling();
    const patch = await github.patched('octo-org', 'billing-app', 42);
    await daemon.idle();

    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore + 1);
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
    const succeeded = bench.events('key.succeeded').filter((event) => event.reason === 'leak');
    expect(succeeded).toHaveLength(1);
    expect(succeeded[0]).toMatchObject({ keyId: BILLING, actor: 'github:octo-org/billing-app#42' });
    expect(JSON.parse(patch.body)).toMatchObject({ state: 'resolved', resolution: 'revoked' });
    expect(github.alerts.get('octo-org/billing-app#42')?.state).toBe('resolved');
    expect(bench.events('leak.reconcile.found')).toEqual([
      expect.objectContaining({
        source: 'github',
        alert: 'octo-org/billing-app#42',
        secretType: 'keyroll_api_key',
      }),
    ]);
    expect(bench.events('leak.intake.resolved')[0]).toMatchObject({
      alert: 'octo-org/billing-app#42',
      keys: [{ keyId: BILLING, result: 'rotated' }],
    });

    // The list is filtered and asks for no secret; only the single alert's fetch carries one.
    const [list] = listRequests();
    const query = new URL(list ?? '', github.url).searchParams;
    expect(list?.startsWith('/orgs/octo-org/secret-scanning/alerts?')).toBe(true);
    expect(Object.fromEntries(query)).toEqual({
      state: 'open',
      secret_type: 'keyroll_api_key',
      per_page: '100',
      hide_secret: 'true',
      after: '',
    });
    expect(github.schemaProblems).toEqual([]);
    expectNoLeak([leaked, await bench.storedSecret(BILLING)]);
  });

  it('is found by the reconcile on the interval while the daemon runs', async () => {
    await bench.writePolicyText(intakePolicy(bench, github, KEYS, RECONCILE('1s')));
    const daemon = await startWithIntake(bench, github);
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    const rollsBefore = bench.emulator.state.rollCount(BILLING);
    // The reconcile at start found nothing; the leak comes after it, and its delivery never does.
    await github.listed(1);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 7, state: 'open', secret: leaked });

    await github.patched('octo-org', 'billing-app', 7);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore + 1);
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
    expect(bench.events('leak.reconcile.started').length).toBeGreaterThanOrEqual(2);
    expectNoLeak([leaked]);
  });
});

describe('GitHub reconcile: what costs no roll', () => {
  it('a resolved alert is not listed and not fetched', async () => {
    const leaked = await storeWhileNoReconcile();
    github.addAlert({
      owner: 'octo-org',
      repo: 'billing-app',
      number: 5,
      state: 'resolved',
      secret: leaked,
      resolution: 'revoked',
    });
    const rollsBefore = bench.emulator.state.rollCount(BILLING);

    const daemon = await startReconciling();
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore);
    expect(github.requests.filter((r) => /\/alerts\/5$/.test(r.url))).toEqual([]);
    expect(bench.events('leak.reconcile.finished')[0]).toMatchObject({ listed: 0, found: 0 });
  });

  it('a value already rotated away is proven dead and its alert closed without a roll', async () => {
    const leaked = await storeWhileNoReconcile();
    // Rotated since (the value is the destination's previous one now, and the API refuses it).
    await bench.writePolicyText(intakePolicy(bench, github, KEYS));
    const between = await startWithIntake(bench, github);
    // compromise: past the policy's minimum interval, like a responder's rotation.
    const answer = await postTrigger(between, {
      body: JSON.stringify({ keys: [BILLING], reason: 'compromise' }),
    });
    expect(answer.status).toBe(202);
    await between.idle();
    await between.shutdown();
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 6, state: 'open', secret: leaked });
    const rollsBefore = bench.emulator.state.rollCount(BILLING);

    const daemon = await startReconciling();
    await github.patched('octo-org', 'billing-app', 6);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore);
    expect(bench.events('leak.intake.resolved')[0]).toMatchObject({
      alert: 'octo-org/billing-app#6',
      keys: [{ keyId: BILLING, result: 'already-dead' }],
    });
    expectNoLeak([leaked]);
  });
});

describe('GitHub reconcile: listing', () => {
  it('follows the cursor over several pages and rolls the key once for every alert of its value', async () => {
    const leaked = await storeWhileNoReconcile();
    github.pageSize = 2;
    for (const number of [1, 2, 3, 4, 5])
      github.addAlert({ owner: 'octo-org', repo: `app-${number}`, number, state: 'open', secret: leaked });
    // Another secret type in the organization: not keyroll's, never listed.
    github.addAlert({
      owner: 'octo-org',
      repo: 'infra',
      number: 9,
      state: 'open',
      secret: 'AKIAIOSFODNN7EXAMPLE',
      secretType: 'aws_access_key_id',
    });
    const rollsBefore = bench.emulator.state.rollCount(BILLING);

    const daemon = await startReconciling();
    await daemon.idle();
    const lists = listRequests();
    expect(lists).toHaveLength(3);
    expect(new URL(lists[1] ?? '', github.url).searchParams.get('after')).not.toBe('');
    for (const number of [1, 2, 3, 4, 5])
      expect(github.alerts.get(`octo-org/app-${number}#${number}`)?.state, `alert ${number}`).toBe(
        'resolved',
      );
    expect(github.alerts.get('octo-org/infra#9')?.state).toBe('open');
    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore + 1);
    expect(bench.events('leak.reconcile.finished')[0]).toMatchObject({
      listed: 5,
      found: 5,
      requests: 3,
      notModified: 0,
    });
    expectNoLeak([leaked]);
  });

  it('asks again with If-None-Match: the second reconcile is answered 304 and spends no request', async () => {
    const leaked = await storeWhileNoReconcile();
    github.addAlert({
      owner: 'octo-org',
      repo: 'billing-app',
      number: 8,
      state: 'open',
      secret: 'a-value-keyroll-does-not-hold-0123456789',
    });
    const daemon = await startReconciling();
    await daemon.idle();
    const remaining = github.rate.remaining;

    await daemon.reconcileLeaks();
    const lists = github.requests.filter((r) => /\/secret-scanning\/alerts\?/.test(r.url));
    expect(lists).toHaveLength(2);
    expect(lists[1]?.headers['if-none-match']).toMatch(/^W\/"/);
    expect(github.rate.remaining).toBe(remaining);
    // The alert is still open (the value is no key's) and was handled within the hour: not again.
    expect(bench.events('leak.reconcile.finished')[1]).toMatchObject({
      listed: 1,
      found: 0,
      notModified: 1,
      skipped: { 'handled-within-window': 1 },
    });
    expectNoLeak([leaked]);
  });
});

describe('GitHub reconcile: within the rate limit', () => {
  it('a low X-RateLimit-Remaining defers the reconcile, and the webhook path still works', async () => {
    const leaked = await storeWhileNoReconcile();
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 11, state: 'open', secret: leaked });
    github.rate.remaining = 20;
    const rollsBefore = bench.emulator.state.rollCount(BILLING);

    const daemon = await startReconciling();
    await daemon.idle();
    // Listed once (the budget was unknown), then stopped short of the webhook path's reserve.
    expect(bench.events('leak.reconcile.rate_limited')[0]).toMatchObject({
      source: 'github',
      step: 'handle',
      why: 'reserve',
      remaining: 19,
      reserve: 500,
    });
    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore);
    expect(bench.events('leak.reconcile.found')).toEqual([]);

    // The next reconcile makes no request at all while the budget is that low.
    const requests = github.requests.length;
    await daemon.reconcileLeaks();
    expect(github.requests.length).toBe(requests);
    expect(bench.events('leak.reconcile.rate_limited')[1]).toMatchObject({ step: 'list', why: 'reserve' });

    // A delivery is handled at once: the reserve is its.
    const delivered = await deliver(
      daemon,
      secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number: 11 }),
    );
    expect(delivered.status).toBe(202);
    await github.patched('octo-org', 'billing-app', 11);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore + 1);
    expectNoLeak([leaked]);
  });

  it('a secondary rate limit (429, Retry-After) is waited out, not alerted', async () => {
    const leaked = await storeWhileNoReconcile();
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 12, state: 'open', secret: leaked });
    github.limitNextLists(1, { status: 429, retryAfterSeconds: 120 });

    const daemon = await startReconciling();
    await daemon.idle();
    expect(bench.events('leak.reconcile.rate_limited')[0]).toMatchObject({
      step: 'list',
      why: 'rate-limited',
    });
    expect(bench.events('leak.reconcile.failed')).toEqual([]);
    expect(bench.alerter.alerts.filter((sent) => sent.alert.step === 'leak-reconcile')).toEqual([]);
    const requests = github.requests.length;
    await daemon.reconcileLeaks();
    expect(github.requests.length).toBe(requests);
  });
});

describe('GitHub reconcile and a webhook delivery at once', () => {
  it('roll the key once and resolve the alert once', async () => {
    const leaked = await storeWhileNoReconcile();
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 21, state: 'open', secret: leaked });
    // Started with no scope, so nothing runs at start; the reload turns the reconcile on and runs one.
    await bench.writePolicyText(intakePolicy(bench, github, KEYS));
    const daemon = await startWithIntake(bench, github);
    const rollsBefore = bench.emulator.state.rollCount(BILLING);
    await bench.writePolicyText(intakePolicy(bench, github, KEYS, RECONCILE()));

    const [reloaded, delivered] = await Promise.all([
      daemon.reload(),
      deliver(
        daemon,
        secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number: 21 }),
      ),
      daemon.reconcileLeaks(),
    ]);
    expect(reloaded.ok).toBe(true);
    expect(delivered.status).toBe(202);
    await daemon.idle();
    await daemon.reconcileLeaks();
    await daemon.idle();

    expect(bench.emulator.state.rollCount(BILLING)).toBe(rollsBefore + 1);
    expect(github.requests.filter((r) => r.method === 'GET' && /\/alerts\/21$/.test(r.url))).toHaveLength(1);
    expect(github.requests.filter((r) => r.method === 'PATCH')).toHaveLength(1);
    expect(bench.events('leak.intake.resolved')).toHaveLength(1);
    expectNoLeak([leaked]);
  });
});
