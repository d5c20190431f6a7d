// A leak is rotated once: two different alerts of one leaked value (two repos, or a delivery and a
// reconcile) roll the key once, however their reads and the rotation interleave, and each is then
// proven dead and resolved. The orderings are held with gates on the file backend, never timing:
// the first rotation's store is held while the second alert reads the destinations (it sees the
// leaked value as current), and that read is held until the first alert is resolved.
import { beforeEach, describe, expect, it } from 'vitest';
import type { Backend } from '../../../src/backends/types.ts';
import { createGate, type DaemonBench } from '../../support/daemon-bench.ts';
import { wrapBackend } from '../../rotation/harness.ts';
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

const webhook = (number: number, repo: string) =>
  secretScanningWebhook('created', { owner: 'octo-org', repo, number });
const comment = (body: string): string =>
  (JSON.parse(body) as { resolution_comment: string }).resolution_comment;

/** Neither value (nor the webhook secret or GitHub token) in any audit line, alert or request to GitHub. */
function expectNothingLeaked(values: string[]): void {
  const sent = [...bench.audit.lines, ...bench.alerter.alerts.map((alert) => JSON.stringify(alert))];
  expectNoSecrets([...sent, ...github.requests.map((request) => JSON.stringify(request))], values);
  expectNoSecrets(sent, [GITHUB_WEBHOOK_SECRET, github.token]);
}

describe('one roll per leaked value, whatever the number of alerts', () => {
  it('a second alert that read the destinations before the first rotation stored, and decides after it ended, joins it: one roll, both alerts proven dead and resolved', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const store = createGate();
    const read = createGate();
    let writes = 0;
    let storeHeld = false;
    const daemon = await startWithIntake(bench, github, {
      runtime: {
        wrapBackend: (_name: string, backend: Backend): Backend =>
          wrapBackend(backend, {
            // The leak rotation's store (the key's second write) waits for the test.
            writeSecret: async (next) => {
              writes += 1;
              if (writes !== 2) return next();
              storeHeld = true;
              await store.wait();
              storeHeld = false;
              return next();
            },
            // The only read while that store is held is the second alert's search: it has read the
            // leaked value as the current one, and waits until the first alert is resolved.
            readSecret: async (next) => {
              const stored = await next();
              if (storeHeld) await read.wait();
              return stored;
            },
          }),
      },
    });
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    expect(bench.emulator.state.rollCount(BILLING)).toBe(1);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 21, state: 'open', secret: leaked });
    github.addAlert({ owner: 'octo-org', repo: 'billing-docs', number: 5, state: 'open', secret: leaked });

    expect((await deliver(daemon, webhook(21, 'billing-app'))).status).toBe(202);
    await store.reached;
    expect((await deliver(daemon, webhook(5, 'billing-docs'))).status).toBe(202);
    await read.reached;
    store.open();
    const first = await github.patched('octo-org', 'billing-app', 21);
    read.open();
    const second = await github.patched('octo-org', 'billing-docs', 5);
    await daemon.idle();

    // One roll for the leak (counted at the emulator), and the leaked value dead.
    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);
    const leakRolls = bench.events('key.rolled').filter((event) => event.reason === 'leak');
    expect(leakRolls).toHaveLength(1);
    const rotationId = leakRolls[0]?.rotationId as string;
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
    const fresh = await bench.storedSecret(BILLING);
    expect(bench.emulator.state.isLiveSecret(BILLING, fresh)).toBe(true);

    // Both alerts proven dead on their own and resolved naming the one rotation.
    expect(bench.events('leak.proven-dead')).toEqual([
      expect.objectContaining({
        keyId: BILLING,
        status: 401,
        rotationId,
        actor: 'github:octo-org/billing-app#21',
      }),
      expect.objectContaining({
        keyId: BILLING,
        status: 401,
        rotationId,
        actor: 'github:octo-org/billing-docs#5',
      }),
    ]);
    expect(bench.events('leak.intake.coalesced')).toEqual([
      expect.objectContaining({ alert: 'octo-org/billing-docs#5', rotationId }),
    ]);
    expect(comment(first.body)).toContain(rotationId);
    expect(comment(second.body)).toContain(rotationId);
    expect(github.alerts.get('octo-org/billing-app#21')?.state).toBe('resolved');
    expect(github.alerts.get('octo-org/billing-docs#5')?.state).toBe('resolved');
    expect(bench.events('leak.intake.resolved').map((event) => event.alert)).toEqual([
      'octo-org/billing-app#21',
      'octo-org/billing-docs#5',
    ]);
    expect(
      bench.alerter.alerts.filter(({ alert }) => alert.severity === 'critical' || alert.severity === 'error'),
    ).toEqual([]);
    expectNothingLeaked([leaked, fresh]);
  });

  it('a second alert that arrives after the first one finished rolls nothing and is resolved', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 21, state: 'open', secret: leaked });
    github.addAlert({ owner: 'octo-org', repo: 'billing-docs', number: 5, state: 'open', secret: leaked });

    expect((await deliver(daemon, webhook(21, 'billing-app'))).status).toBe(202);
    await github.patched('octo-org', 'billing-app', 21);
    await daemon.idle();
    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);
    expect((await deliver(daemon, webhook(5, 'billing-docs'))).status).toBe(202);
    const second = await github.patched('octo-org', 'billing-docs', 5);
    await daemon.idle();

    expect(bench.emulator.state.rollCount(BILLING)).toBe(2);
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
    expect(bench.events('leak.proven-dead')).toEqual([
      expect.objectContaining({ keyId: BILLING, status: 401, actor: 'github:octo-org/billing-app#21' }),
      expect.objectContaining({ keyId: BILLING, status: 401, actor: 'github:octo-org/billing-docs#5' }),
    ]);
    expect(comment(second.body)).toContain('already rotated away');
    expect(github.alerts.get('octo-org/billing-docs#5')?.state).toBe('resolved');
    expectNothingLeaked([leaked, await bench.storedSecret(BILLING)]);
  });

  it('an alert of a value still stored but already refused by the API (rolled elsewhere) is proven dead and resolved with no roll', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const daemon = await startWithIntake(bench, github);
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    // Another process (a replica, `rotate --leaked-secret-stdin` on a laptop, the dashboard) rolled
    // the key; this daemon's destination still holds the leaked value as the current one.
    bench.emulator.state.rollKey(BILLING);
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(false);
    const rolls = bench.emulator.state.rollCount(BILLING);
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 21, state: 'open', secret: leaked });

    expect((await deliver(daemon, webhook(21, 'billing-app'))).status).toBe(202);
    const patch = await github.patched('octo-org', 'billing-app', 21);
    await daemon.idle();

    expect(bench.emulator.state.rollCount(BILLING)).toBe(rolls);
    expect(bench.events('leak.identified')).toEqual([
      expect.objectContaining({ keyId: BILLING, which: 'current' }),
    ]);
    expect(bench.events('leak.proven-dead')).toEqual([
      expect.objectContaining({ keyId: BILLING, status: 401 }),
    ]);
    expect(comment(patch.body)).toContain('already rotated away');
    expect(github.alerts.get('octo-org/billing-app#21')?.state).toBe('resolved');
    expectNothingLeaked([leaked]);
  });
});
