// A replica that dies between accepting work and starting it (issue 30). Two `keyroll daemon`
// replicas on a Lease of the real kube-apiserver (b-replicas.ts), sharing the replay records; the
// one that accepts the request is SIGKILLed when its rotation reaches its first step (the test
// pause point before the preflight: nothing is locked, marked or rolled yet, so nothing in any
// backend tells another runner that the work exists). Who sees it (docs/daemon.md, "Replicas
// and the leader"):
// - a GitHub leak delivery: answered 202 and dropped; GitHub does not redeliver, but the alert is
//   still open, and the other replica's reconcile, run as soon as it leads, takes it: the leaked
//   value is proven dead, the alert resolved, the key rolled once;
// - a signed trigger: answered 202 before its rotations start, and the answer says so
//   (`started: false`): no reconcile can find it (nothing is open anywhere), so the caller must
//   see it. The test is that caller: the next leader's sweep and reconcile leave the key alone,
//   the caller finds no key.succeeded for the promised rotation id, its first request is spent
//   on every replica (409 replay), and a new request (fresh nonce) to the other replica rotates it.
import { describe, expect, it } from 'vitest';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from '../integration/servers.ts';
import { signedHeaders, TRIGGER_SECRET } from '../support/daemon-bench.ts';
import { secretScanningWebhook } from '../support/fake-github.ts';
import { deliver } from '../leaks/github/support.ts';
import type { ChildResult, RunningChild } from './b-child.ts';
import { judgeLeakRuns, openLeakWorld, type LeakWorld } from './b-leak-replicas.ts';
import { eventsOf, openReplicaCluster, replicaUrl, untilHolder } from './b-replicas.ts';
import { faultKey } from './b-world.ts';
import { recordCase } from './record.ts';

const KEY = faultKey('key_demo_billing', 0);
const WEBHOOK_SECRET = 'github-webhook-secret-for-the-replica-fault-cases';
const ALERT = { owner: 'octo-org', repo: 'shop', number: 7 };

const kube = await kubeApiServer();

interface Replicas extends LeakWorld {
  /** Accepts the request and is killed before its rotation starts; the leader at first. */
  a: RunningChild;
  /** The other replica: the next leader. */
  b: RunningChild;
  aUrl: string;
  bUrl: string;
}

/** A world, the fake GitHub, and two replicas: A leads (its first reconcile done), B stands by. */
async function startReplicas(): Promise<Replicas> {
  if (kube === undefined) throw new Error('no Kubernetes API server');
  // The reconcile runs when a replica becomes leader, then hourly: no pass of A's can meet the alert.
  const leak = await openLeakWorld({ key: KEY, webhookSecret: WEBHOOK_SECRET });
  try {
    const cluster = await openReplicaCluster(kube, leak.world);
    const options = {
      args: ['--trigger-key', 'alice=env:KEYROLL_TRIGGER_KEY_ALICE'],
      env: { KEYROLL_TRIGGER_KEY_ALICE: TRIGGER_SECRET, ...leak.intakeEnv },
    };
    const a = leak.track(cluster.spawnReplica('keyroll-a', { ...options, pauseAt: 'preflight' }));
    await untilHolder(cluster, 'keyroll-a');
    await waitFor(() => eventsOf(a, 'leak.reconcile.finished').length > 0, "the leader's first reconcile");
    const b = leak.track(cluster.spawnReplica('keyroll-b', options));
    const [aUrl, bUrl] = await Promise.all([replicaUrl(a), replicaUrl(b)]);
    return { ...leak, a, b, aUrl, bUrl };
  } catch (error) {
    await leak.close();
    throw error;
  }
}

async function postTrigger(
  url: string,
  body: string,
  headers: Record<string, string>,
): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${url}/v1/rotations`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body,
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/** Kills A where its rotation would start, then waits until B leads and has reconciled once. */
async function killBeforeStartAndFailOver(replicas: Replicas): Promise<ChildResult> {
  await replicas.a.waitForStderr('keyroll: paused at preflight\n');
  const killed = await replicas.a.kill();
  await waitFor(() => eventsOf(replicas.b, 'leader.elected').length === 1, 'B leads', { timeoutMs: 60_000 });
  await waitFor(
    () => eventsOf(replicas.b, 'leak.reconcile.finished').length > 0,
    "the next leader's first reconcile",
    { timeoutMs: 60_000 },
  );
  return killed;
}

describe.skipIf(kube === undefined)('a replica SIGKILLed between accepting work and starting it', () => {
  it("a GitHub leak delivery: the replica answered 202 and died; the other replica's reconcile takes the open alert, rotates once and resolves it", async (ctx) => {
    const replicas = await startReplicas();
    try {
      const { world, github, a, b } = replicas;
      github.addAlert({ ...ALERT, state: 'open', secret: replicas.leaked });
      const answer = await deliver({ url: replicas.aUrl }, secretScanningWebhook('created', ALERT), {
        secret: WEBHOOK_SECRET,
      });
      const killed = await killBeforeStartAndFailOver(replicas);
      await waitFor(
        () => github.alerts.get(`${ALERT.owner}/${ALERT.repo}#${String(ALERT.number)}`)?.state === 'resolved',
        'the alert resolved',
        { timeoutMs: 60_000 },
      );
      b.process.kill('SIGTERM');
      const next = await b.result;
      const verdict = await judgeLeakRuns(replicas, KEY, [killed, next]);
      const found = next.events.filter((event) => event.event === 'leak.reconcile.found');
      recordCase(ctx, {
        case: 'replica SIGKILLed after accepting a GitHub delivery (reconcile takes it)',
        fault: 'SIGKILL between 202 and start',
        backend: 'file',
        step: 'preflight',
        result: 'rotated',
        lost: verdict.lost.lost,
        leaked: verdict.leaks.leaked,
        // The dropped job is seen by the reconcile that took it over (no person has to act).
        alerted: found.length === 1 ? 1 : 0,
        failures: 1,
      });

      expect(answer.status).toBe(202);
      expect(eventsOf(a, 'leak.intake.accepted')).toHaveLength(1);
      expect(killed.signal).toBe('SIGKILL');
      expect(killed.events.filter((event) => event.event === 'key.rolled')).toEqual([]);
      expect(found).toEqual([expect.objectContaining({ alert: expect.stringContaining('#7') as unknown })]);
      expect(world.emulator.state.rollCount(KEY.id)).toBe(1);
      expect(world.emulator.state.isLiveSecret(KEY.id, replicas.leaked)).toBe(false);
      expect((await world.files.readState(KEY.target)).intent).toBeUndefined();
      expect(next.code, next.stderr).toBe(0);
      expect(verdict.lost.lostKeys).toEqual([]);
      expect(verdict.rolls.problems).toEqual([]);
      expect(verdict.leaks.hits).toEqual([]);
    } finally {
      await replicas.close();
    }
  }, 180_000);

  it('a signed trigger: the replica answered 202 (started: false) and died; no replica runs it, the caller sees no key.succeeded and sends a new request to the other replica', async (ctx) => {
    const replicas = await startReplicas();
    try {
      const { world, b } = replicas;
      const body = JSON.stringify({ keys: [KEY.id], reason: 'leak', ticket: 'INC-30' });
      const headers = signedHeaders({ body });
      const answer = await postTrigger(replicas.aUrl, body, headers);
      const killed = await killBeforeStartAndFailOver(replicas);
      // The next leader has reconciled (and swept, beside it): nothing anywhere told it of the trigger.
      const rollsAfterFailover = world.emulator.state.rollCount(KEY.id);
      const leakedAliveAfterFailover = world.emulator.state.isLiveSecret(KEY.id, replicas.leaked);
      // The caller follows its promised rotation id, as the answer's note says: no key.succeeded.
      const promised = (answer.json.rotations as { rotationId: string }[] | undefined)?.[0]?.rotationId;
      const succeeded = killed.events.filter(
        (event) => event.event === 'key.succeeded' && event.rotationId === promised,
      );
      const replayed = await postTrigger(replicas.bUrl, body, headers);
      const again = await postTrigger(replicas.bUrl, body, signedHeaders({ body }));
      await waitFor(
        () => !world.emulator.state.isLiveSecret(KEY.id, replicas.leaked),
        'the leaked value dead',
      );
      await waitFor(() => eventsOf(b, 'key.succeeded').length === 1, 'the second request rotated the key', {
        timeoutMs: 60_000,
      });
      b.process.kill('SIGTERM');
      const next = await b.result;
      const verdict = await judgeLeakRuns(replicas, KEY, [killed, next]);
      recordCase(ctx, {
        case: 'replica SIGKILLed after accepting a signed trigger (the caller sends again)',
        fault: 'SIGKILL between 202 and start',
        backend: 'file',
        step: 'preflight',
        result: 'rotated',
        lost: verdict.lost.lost,
        leaked: verdict.leaks.leaked,
        // Seen by the caller: the answer said the rotation had not started, and it never succeeded.
        alerted: answer.json.started === false && succeeded.length === 0 ? 1 : 0,
        failures: 1,
      });

      expect(answer.status).toBe(202);
      expect(answer.json).toMatchObject({ started: false, reason: 'leak', force: true, actor: 'alice' });
      expect(typeof promised).toBe('string');
      expect(killed.signal).toBe('SIGKILL');
      expect(succeeded).toEqual([]);
      // Nobody else ran it: the next leader's sweep and reconcile left the key as it was.
      expect(rollsAfterFailover).toBe(0);
      expect(leakedAliveAfterFailover).toBe(true);
      // The first request is spent on every replica (shared replay record); a new one is not.
      expect(replayed).toMatchObject({ status: 409, json: { error: { code: 'replay' } } });
      expect(again.status).toBe(202);
      expect(world.emulator.state.rollCount(KEY.id)).toBe(1);
      expect(next.code, next.stderr).toBe(0);
      expect(verdict.lost.lostKeys).toEqual([]);
      expect(verdict.rolls.problems).toEqual([]);
      expect(verdict.leaks.hits).toEqual([]);
    } finally {
      await replicas.close();
    }
  }, 180_000);
});
