// Issue 30, item 3: a replica SIGTERMed while a leak job waits for its key (another rotation holds
// it) never starts that leak rotation, and must not then "prove" the untouched value alive and
// raise a false critical KR_LEAK_STILL_ALIVE. It hands the alert back: left open and unanswered
// (audited leak.intake.handed_back) for the reconcile of another replica to take.
import { beforeEach, describe, expect, it } from 'vitest';
import type { Backend } from '../../../src/backends/types.ts';
import { wrapBackend } from '../../rotation/harness.ts';
import { createGate, postTrigger, type DaemonBench } from '../../support/daemon-bench.ts';
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

describe('daemon shutdown with a leak job waiting for its key', () => {
  it('hands the alert back unanswered, with no KR_LEAK_STILL_ALIVE', async () => {
    await bench.writePolicyText(intakePolicy(bench, github));
    const gate = createGate();
    let holdLock = false;
    const daemon = await startWithIntake(bench, github, {
      runtime: {
        // A manual rotation takes the key's in-process hold and stops at its backend lock.
        wrapBackend: (_name: string, backend: Backend): Backend =>
          wrapBackend(backend, {
            acquireLock: async (next) => {
              if (holdLock) {
                holdLock = false;
                await gate.wait();
              }
              return next();
            },
          }),
      },
    });
    const leaked = await storeFirstSecret(bench, daemon, BILLING);
    holdLock = true;
    expect(
      (await postTrigger(daemon, { body: JSON.stringify({ keys: [BILLING], reason: 'manual' }) })).status,
    ).toBe(202);
    await gate.reached;
    github.addAlert({ owner: 'octo-org', repo: 'billing-app', number: 41, state: 'open', secret: leaked });
    const webhook = secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number: 41 });
    expect((await deliver(daemon, webhook)).status).toBe(202);
    await waitFor(() => bench.events('leak.identified').length === 1, 'leak.identified');
    const stopping = daemon.shutdown('SIGTERM');
    gate.open();
    await stopping;
    expect(bench.alerter.alerts.filter(({ alert }) => alert.errorCode === 'KR_LEAK_STILL_ALIVE')).toEqual([]);
    expect(bench.events('leak.intake.handed_back')).toEqual([
      expect.objectContaining({ keyId: BILLING, alert: 'octo-org/billing-app#41', why: 'shutdown' }),
    ]);
    // Unanswered: the alert stays open for a reconcile, and the leaked value was not rolled here.
    expect(github.alerts.get('octo-org/billing-app#41')?.state).toBe('open');
    expect(github.requests.filter((request) => request.method === 'PATCH')).toEqual([]);
    expect(bench.emulator.state.isLiveSecret(BILLING, leaked)).toBe(true);
  });
});
