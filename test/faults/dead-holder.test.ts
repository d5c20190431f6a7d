// A replica SIGKILLed holding a leak's key lock (issue 30, the 10:06 `ha` run's key_ha_048): two
// `keyroll daemon` replicas on a Lease of the real kube-apiserver (b-replicas.ts), each told its
// pod by the downward API's variables, with a Pod object each (no kubelet here: the test creates
// them and writes their status through /status, as a kubelet would). Replica A takes a GitHub leak
// delivery and stops at its roll: the key's lock taken (lockTtl 15 m, the default) and its intent
// marker written. Then:
// - A is SIGKILLed and its Pod object deleted (or its keyroll container reported restarted): B's
//   next try (its reconcile, as it becomes leader) proves A dead, takes the lock over at once and rotates the leaked key; the intent
//   marker A left is repaired (a leak it had not rolled: KR_RECOVERED_LEAK), nothing lost or leaked.
//   B's own marker is held for a lock TTL after a takeover, as after any (step-decide.ts): a roll
//   request A had sent before it died could still be applied by the API;
// - A is only SIGSTOPped, its pod still running since before A started: B (leader once A's Lease
//   lapses) answers busy, as before.
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parsePodLockOwner } from '../../src/rotation/lock-owner.ts';
import { adminKubeConfig } from '../support/kube-apiserver.ts';
import { startKeyrollPod } from '../support/kube-pods.ts';
import { findSecrets } from '../support/secret-scan.ts';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from '../integration/servers.ts';
import { secretScanningWebhook } from '../support/fake-github.ts';
import { deliver } from '../leaks/github/support.ts';
import { OWNER_TOKEN, type RunningChild } from './b-child.ts';
import { judgeLeakRuns, openLeakWorld, type LeakWorld } from './b-leak-replicas.ts';
import { eventsOf, openReplicaCluster, replicaUrl, untilHolder } from './b-replicas.ts';
import { faultKey } from './b-world.ts';
import { recordCase } from './record.ts';

const KEY = faultKey('key_demo_billing', 0);
const WEBHOOK_SECRET = 'github-webhook-secret-for-the-dead-holder-cases';
const ALERT = { owner: 'octo-org', repo: 'shop', number: 48 };
const ALERT_ID = `${ALERT.owner}/${ALERT.repo}#${String(ALERT.number)}`;

const kube = await kubeApiServer();

interface Holders extends LeakWorld {
  core: CoreV1Api;
  namespace: string;
  /** Holds the leak's lock, stopped at its roll. */
  a: RunningChild;
  b: RunningChild;
  /** The lock owner A wrote. */
  owner: string;
}

/** Two replicas with their pods; A has taken the leak delivery and stopped at its roll, holding the lock. */
async function holdLeakLock(): Promise<Holders> {
  if (kube === undefined) throw new Error('no Kubernetes API server');
  const leak = await openLeakWorld({
    key: KEY,
    webhookSecret: WEBHOOK_SECRET,
    policy: { lockTtl: '15m', clockSkew: '1s' },
  });
  try {
    const { world, github } = leak;
    const cluster = await openReplicaCluster(kube, world);
    const admin: KubeConfig = adminKubeConfig(kube);
    const core = admin.makeApiClient(CoreV1Api);
    const { namespace } = cluster;
    // The containers started before the processes in them: a second ago, by the node's clock.
    const uidA = await startKeyrollPod(core, namespace, 'keyroll-a', new Date(Date.now() - 1_000));
    const uidB = await startKeyrollPod(core, namespace, 'keyroll-b', new Date(Date.now() - 1_000));
    const env = (name: string, uid: string): Record<string, string> => ({
      ...leak.intakeEnv,
      POD_NAMESPACE: namespace,
      POD_NAME: name,
      POD_UID: uid,
    });
    const a = leak.track(cluster.spawnReplica('keyroll-a', { pauseAt: 'roll', env: env('keyroll-a', uidA) }));
    await untilHolder(cluster, 'keyroll-a');
    await waitFor(() => eventsOf(a, 'leak.reconcile.finished').length > 0, "the leader's first reconcile");
    const b = leak.track(cluster.spawnReplica('keyroll-b', { env: env('keyroll-b', uidB) }));
    const aUrl = await replicaUrl(a);
    await replicaUrl(b);
    github.addAlert({ ...ALERT, state: 'open', secret: leak.leaked });
    const answer = await deliver({ url: aUrl }, secretScanningWebhook('created', ALERT), {
      secret: WEBHOOK_SECRET,
    });
    expect(answer.status).toBe(202);
    await a.waitForStderr('keyroll: paused at roll\n');
    const lock = (await world.files.readState(KEY.target)).lock;
    if (lock === undefined) throw new Error('A holds no lock');
    return { ...leak, core, namespace, a, b, owner: lock.owner };
  } catch (error) {
    await leak.close();
    throw error;
  }
}

const KILLS = [
  {
    name: 'its Pod object deleted',
    proof: 'pod-gone',
    bury: async (holders: Holders): Promise<void> => {
      await holders.core.deleteNamespacedPod({ namespace: holders.namespace, name: 'keyroll-a' });
    },
  },
  {
    name: 'its keyroll container reported restarted',
    proof: 'container-restarted',
    bury: async (holders: Holders): Promise<void> => {
      const started = parsePodLockOwner(holders.owner)?.startedAtMs ?? Date.now();
      // The kubelet's restart comes after the holder started, by more than the policy's 1 s skew
      // and the second the API server's whole-second times may cut off.
      await waitFor(() => Date.now() > started + 2_500, 'past the clock skew', { timeoutMs: 10_000 });
      // The container restarts in its pod: same name and UID, running since now.
      await startKeyrollPod(holders.core, holders.namespace, 'keyroll-a', new Date());
    },
  },
] as const;

describe.skipIf(kube === undefined)("a replica SIGKILLed holding a leak's key lock", () => {
  for (const kill of KILLS) {
    it(`killed, ${kill.name}: the other replica proves it dead and rotates the leaked key at once, the intent repaired`, async (ctx) => {
      const holders = await holdLeakLock();
      try {
        const { world, github, b } = holders;
        expect(holders.owner).toMatch(new RegExp(`^pod:${holders.namespace}/keyroll-a/`));
        const atKill = await world.files.readState(KEY.target);
        const killed = await holders.a.kill();
        await kill.bury(holders);
        // B's next try: its reconcile, run as soon as it leads (A's Lease lapses; GitHub does not
        // redeliver, and a replayed delivery body is refused as one already taken).
        await waitFor(() => github.alerts.get(ALERT_ID)?.state === 'resolved', 'the alert resolved', {
          timeoutMs: 60_000,
        });
        await waitFor(() => eventsOf(b, 'key.succeeded').length > 0, "B's rotation finished");
        b.process.kill('SIGTERM');
        const next = await b.result;
        if (process.env.KEYROLL_FAULTS_DEBUG)
          process.stderr.write(
            `${next.events.map((event) => JSON.stringify(event)).join('\n')}\n${next.stderr}\n`,
          );
        const verdict = await judgeLeakRuns(holders, KEY, [killed, next]);
        const alerts = world.alerts().filter((alert) => alert.keyId === KEY.id);
        recordCase(ctx, {
          case: `replica SIGKILLed holding a leak's lock, ${kill.name} (holder proven dead)`,
          fault: 'SIGKILL with the key lock held',
          backend: 'cli',
          step: 'roll',
          result: 'recovered',
          lost: verdict.lost.lost,
          leaked: verdict.leaks.leaked,
          alerted: alerts.filter((alert) => alert.step === 'recovery').length === 1 ? 1 : 0,
          failures: 1,
        });

        // A died where it was meant to: the lock and the leak's intent marker held, nothing rolled.
        expect(killed.signal).toBe('SIGKILL');
        expect(atKill.lock?.owner).toBe(holders.owner);
        expect(atKill.intent).toBeDefined();
        expect(killed.events.filter((event) => event.event === 'key.rolled')).toEqual([]);
        // B took the lock over from the proven-dead holder, not after its 15 minutes.
        expect(eventsOf(b, 'key.lock.holder_dead')).toEqual([
          expect.objectContaining({
            keyId: KEY.id,
            holder: holders.owner,
            proof: expect.objectContaining({
              kind: kill.proof,
              pod: `${holders.namespace}/keyroll-a`,
            }) as unknown,
          }),
        ]);
        expect(eventsOf(b, 'key.lock.acquired')).toContainEqual(
          expect.objectContaining({ keyId: KEY.id, tookOver: true }),
        );
        // The leaked value is dead, rolled once; the intent marker A left answered as its leak.
        expect(world.emulator.state.isLiveSecret(KEY.id, holders.leaked)).toBe(false);
        expect(world.emulator.state.rollCount(KEY.id)).toBe(1);
        // A's marker is gone; B's own stays held for a lock TTL (a roll A had in flight when it died
        // could still land at the API: later runs probe the stored secret until then).
        const after = await world.files.readState(KEY.target);
        expect(after.intent?.rotationId).not.toBe(atKill.intent?.rotationId);
        expect(after.intent?.holdUntil).toBeDefined();
        expect(await world.storedSecret(KEY)).not.toBe(holders.leaked);
        expect(alerts.filter((alert) => alert.step === 'recovery')).toEqual([
          expect.objectContaining({ errorCode: 'KR_RECOVERED_LEAK' }),
        ]);
        expect(next.code, next.stderr).toBe(0);
        expect(verdict.lost.lostKeys).toEqual([]);
        expect(verdict.rolls.problems).toEqual([]);
        expect(verdict.leaks.hits).toEqual([]);
      } finally {
        await holders.close();
      }
    }, 180_000);
  }

  it('only paused (SIGSTOP), its pod running since before it started: the other replica answers busy and waits', async (ctx) => {
    const holders = await holdLeakLock();
    try {
      const { world, b } = holders;
      holders.a.process.kill('SIGSTOP');
      // B leads once A's Lease lapses, and its reconcile takes the open alert.
      await waitFor(() => eventsOf(b, 'key.lock.busy').length > 0, "B's try meets the lock", {
        timeoutMs: 60_000,
      });
      const busy = eventsOf(b, 'key.lock.busy');
      recordCase(ctx, {
        case: "replica SIGSTOPped holding a leak's lock, its pod running (not proven dead)",
        fault: 'SIGSTOP with the key lock held',
        backend: 'cli',
        step: 'roll',
        result: 'skipped',
        lost: 0,
        leaked: findSecrets(world.haystacks(), [...world.emulator.state.mintedSecrets(), OWNER_TOKEN]).leaked,
        alerted: 0,
        failures: 0,
      });

      expect(busy[0]).toMatchObject({ keyId: KEY.id, holder: holders.owner });
      expect(eventsOf(b, 'key.lock.holder_dead')).toEqual([]);
      expect(eventsOf(b, 'key.rolled')).toEqual([]);
      expect(world.emulator.state.rollCount(KEY.id)).toBe(0);
      expect((await world.files.readState(KEY.target)).lock?.owner).toBe(holders.owner);
    } finally {
      await holders.close();
    }
  }, 180_000);
});
