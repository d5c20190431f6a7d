// The leader election of the daemon's replicas (src/leader/) on the real kube-apiserver the
// integration setup starts: two electors on one coordination.k8s.io/v1 Lease, each reaching the
// API server through its own TCP fault proxy (test/faults/proxy.ts), so "a leader that stopped
// renewing" is a real network fault (its requests go unanswered or are reset), not a mocked one.
// Short timings (lease 3 s, renew deadline 2 s, retry 0.25 s) keep each case to seconds; the
// rules between them are the defaults' (15 s, 10 s, 2 s). What is asserted is order, never time:
// a leader stops starting work (its term signal aborts, isLeader() turns false) before any other
// replica starts leading, and a released Lease is taken long before it could have expired.
import { randomBytes } from 'node:crypto';
import {
  CoordinationV1Api,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type V1Lease,
  type V1Role,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { LeaderElector, type ElectionTimings, type LossReason } from '../../src/leader/elector.ts';
import { KubeLeaseStore } from '../../src/leader/kube-lease-store.ts';
import { startFaultProxy, type FaultProxy } from '../faults/proxy.ts';
import {
  adminKubeConfig,
  refusalStatus,
  serviceAccountCredentials,
  type KubeApiServerInfo,
} from '../support/kube-apiserver.ts';
import { renderConsumerTemplates } from '../support/consumer-cluster.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();

const TIMINGS: ElectionTimings = { leaseDurationMs: 3_000, renewDeadlineMs: 2_000, retryPeriodMs: 250 };

/** Everything the electors of one test did, in the order it happened (one process, one event loop). */
type Happening =
  { who: string; what: 'started' } | { who: string; what: 'stopped'; why: LossReason; leaderStill: boolean };

interface Candidate {
  name: string;
  elector: LeaderElector;
  proxy: FaultProxy;
  /** The signals of this candidate's terms: each must be aborted when its term ends. */
  terms: AbortSignal[];
}

if (server === undefined) {
  describe.skip('leader election on a Lease (no Kubernetes API server; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const step of cleanup.splice(0).reverse()) await step();
  });

  async function freshNamespace(): Promise<string> {
    const namespace = `keyroll-lease-${randomBytes(4).toString('hex')}`;
    await adminKubeConfig(kube)
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: namespace } } });
    return namespace;
  }

  async function candidate(
    name: string,
    namespace: string,
    happenings: Happening[],
    timings: ElectionTimings = TIMINGS,
  ): Promise<Candidate> {
    const proxy = await startFaultProxy(kube.server.replace('https://', 'http://'));
    const viaProxy: KubeApiServerInfo = { ...kube, server: `https://127.0.0.1:${String(proxy.port)}` };
    const terms: AbortSignal[] = [];
    const elector: LeaderElector = new LeaderElector({
      ...timings,
      store: new KubeLeaseStore(adminKubeConfig(viaProxy), { namespace, name: 'keyroll-leader' }),
      identity: name,
      events: {
        startedLeading: (term) => {
          terms.push(term.signal);
          happenings.push({ who: name, what: 'started' });
        },
        stoppedLeading: (term, why) => {
          happenings.push({
            who: name,
            what: 'stopped',
            why,
            leaderStill: elector.isLeader() || !term.signal.aborted,
          });
        },
        failed: () => undefined,
      },
    });
    cleanup.push(async () => {
      await elector.stop();
      await proxy.close();
    });
    return { name, elector, proxy, terms };
  }

  /** Resolves once `test` holds, checking every 20 ms; rejects after `ms` (a bound for a hung test, not a measurement). */
  async function until(test: () => boolean, ms: number, what: string): Promise<void> {
    const deadline = Date.now() + ms;
    while (!test()) {
      if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  /** Samples both electors every 10 ms while `during` runs: the times both said they lead. */
  async function bothLeading(a: LeaderElector, b: LeaderElector, during: Promise<void>): Promise<number> {
    let both = 0;
    const state = { done: false };
    void during.finally(() => {
      state.done = true;
    });
    while (!state.done) {
      if (a.isLeader() && b.isLeader()) both++;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await during;
    return both;
  }

  async function leaseOf(namespace: string): Promise<{ holderIdentity?: string; leaseTransitions?: number }> {
    const lease = await adminKubeConfig(kube)
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace, name: 'keyroll-leader' });
    return lease.spec ?? {};
  }

  describe('leader election on a coordination.k8s.io/v1 Lease (real kube-apiserver)', () => {
    it('two candidates started together: exactly one leads, keeps leading past its renew deadline (it renews), and the Lease names it', async () => {
      const namespace = await freshNamespace();
      const happenings: Happening[] = [];
      const a = await candidate('keyroll-a', namespace, happenings);
      const b = await candidate('keyroll-b', namespace, happenings);
      a.elector.start();
      b.elector.start();
      const both = await bothLeading(
        a.elector,
        b.elector,
        until(() => a.elector.isLeader() || b.elector.isLeader(), 20_000, 'one leads').then(
          () => new Promise((resolve) => setTimeout(resolve, TIMINGS.leaseDurationMs)),
        ),
      );
      expect(both).toBe(0);
      expect(happenings.map(({ what }) => what)).toEqual(['started']);
      const leader = a.elector.isLeader() ? a : b;
      expect((await leaseOf(namespace)).holderIdentity).toBe(leader.name);
    });

    it('a leader that stops renewing (paused: its requests go unanswered) stops leading before the other takes over, and the other does take over', async () => {
      const namespace = await freshNamespace();
      const happenings: Happening[] = [];
      const a = await candidate('keyroll-a', namespace, happenings);
      a.elector.start();
      await until(() => a.elector.isLeader(), 20_000, 'a leads');
      const b = await candidate('keyroll-b', namespace, happenings);
      b.elector.start();
      // b has read the Lease at least once, so it times a's lease from then.
      await new Promise((resolve) => setTimeout(resolve, TIMINGS.retryPeriodMs * 3));
      a.proxy.set({ kind: 'silent' });
      await until(() => b.elector.isLeader(), 20_000, 'b takes over');
      expect(happenings.map(({ who, what }) => `${who} ${what}`)).toEqual([
        'keyroll-a started',
        'keyroll-a stopped',
        'keyroll-b started',
      ]);
      expect(happenings[1]).toMatchObject({ why: 'renew-deadline', leaderStill: false });
      expect(a.terms[0]?.aborted).toBe(true);
      expect(a.elector.isLeader()).toBe(false);
      const lease = await leaseOf(namespace);
      expect(lease).toMatchObject({ holderIdentity: 'keyroll-b', leaseTransitions: 1 });
    });

    it('a leader cut off from the API server (every connection reset) stops starting work at its renew deadline, before its lease could be taken over', async () => {
      const namespace = await freshNamespace();
      const happenings: Happening[] = [];
      const a = await candidate('keyroll-a', namespace, happenings);
      a.elector.start();
      await until(() => a.elector.isLeader(), 20_000, 'a leads');
      const b = await candidate('keyroll-b', namespace, happenings);
      b.elector.start();
      await new Promise((resolve) => setTimeout(resolve, TIMINGS.retryPeriodMs * 3));
      a.proxy.set({ kind: 'down' });
      const both = await bothLeading(
        a.elector,
        b.elector,
        until(() => b.elector.isLeader(), 20_000, 'b takes over'),
      );
      expect(both).toBe(0);
      expect(happenings.map(({ who, what }) => `${who} ${what}`)).toEqual([
        'keyroll-a started',
        'keyroll-a stopped',
        'keyroll-b started',
      ]);
      expect(happenings[1]).toMatchObject({ why: 'renew-deadline', leaderStill: false });
      // The cut-off replica keeps trying; once it can reach the API server again it is a candidate, not a second leader.
      a.proxy.set({ kind: 'pass' });
      await new Promise((resolve) => setTimeout(resolve, TIMINGS.retryPeriodMs * 6));
      expect(a.elector.isLeader()).toBe(false);
      expect(b.elector.isLeader()).toBe(true);
    });

    it('a graceful stop releases the Lease: the other takes over at its next retry, long before the lease duration could run out', async () => {
      const namespace = await freshNamespace();
      const happenings: Happening[] = [];
      // A lease duration far past this test's own timeout: only a release can hand over in time.
      const long: ElectionTimings = { leaseDurationMs: 600_000, renewDeadlineMs: 2_000, retryPeriodMs: 250 };
      const a = await candidate('keyroll-a', namespace, happenings, long);
      a.elector.start();
      await until(() => a.elector.isLeader(), 20_000, 'a leads');
      const b = await candidate('keyroll-b', namespace, happenings, long);
      b.elector.start();
      await new Promise((resolve) => setTimeout(resolve, long.retryPeriodMs * 3));
      expect(b.elector.isLeader()).toBe(false);
      await a.elector.stop();
      expect(a.terms[0]?.aborted).toBe(true);
      await until(() => b.elector.isLeader(), 10_000, 'b takes over the released Lease');
      expect(
        happenings.map((h) => (h.what === 'stopped' ? `${h.who} stopped (${h.why})` : `${h.who} started`)),
      ).toEqual(['keyroll-a started', 'keyroll-a stopped (released)', 'keyroll-b started']);
      expect((await leaseOf(namespace)).holderIdentity).toBe('keyroll-b');
    });

    it("the chart's Lease and Role: keyroll's service account leads on that one Lease with get and update, and may neither create a Lease nor read another", async () => {
      const namespace = await freshNamespace();
      const rendered = (await renderConsumerTemplates(namespace, [], ['templates/leader-rbac.yaml'], {
        set: ['daemon.enabled=true', 'cronjob.enabled=false'],
      })) as (V1Lease | V1Role | V1RoleBinding)[];
      const admin = adminKubeConfig(kube);
      const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
      const leases = admin.makeApiClient(CoordinationV1Api);
      const { kubeConfig } = await serviceAccountCredentials(kube, namespace, 'keyroll');
      for (const object of rendered) {
        if (object.kind === 'Lease') await leases.createNamespacedLease({ namespace, body: object });
        if (object.kind === 'Role') await rbac.createNamespacedRole({ namespace, body: object });
        if (object.kind === 'RoleBinding')
          await rbac.createNamespacedRoleBinding({ namespace, body: object as V1RoleBinding });
      }
      expect(rendered.map((object) => object.kind).sort()).toEqual(['Lease', 'Role', 'RoleBinding']);
      const leaseName = rendered.find((object) => object.kind === 'Lease')?.metadata?.name ?? '';
      expect(leaseName).toBe('keyroll-leader');
      const happenings: Happening[] = [];
      const elector = new LeaderElector({
        ...TIMINGS,
        store: new KubeLeaseStore(kubeConfig, { namespace, name: leaseName }),
        identity: 'keyroll-7d9f-abcde',
        events: {
          startedLeading: () => happenings.push({ who: 'keyroll', what: 'started' }),
          stoppedLeading: (_term, why) =>
            happenings.push({ who: 'keyroll', what: 'stopped', why, leaderStill: false }),
          failed: (error) => {
            throw error;
          },
        },
      });
      cleanup.push(() => elector.stop());
      elector.start();
      await until(() => elector.isLeader(), 20_000, 'the service account leads');
      expect((await leaseOf(namespace)).holderIdentity).toBe('keyroll-7d9f-abcde');
      const asKeyroll = kubeConfig.makeApiClient(CoordinationV1Api);
      expect(
        await refusalStatus(() =>
          asKeyroll.createNamespacedLease({ namespace, body: { metadata: { name: 'another' }, spec: {} } }),
        ),
      ).toBe(403);
      await leases.createNamespacedLease({
        namespace,
        body: { metadata: { name: 'someone-elses' }, spec: {} },
      });
      expect(
        await refusalStatus(() => asKeyroll.readNamespacedLease({ namespace, name: 'someone-elses' })),
      ).toBe(403);
      expect(await refusalStatus(() => asKeyroll.deleteNamespacedLease({ namespace, name: leaseName }))).toBe(
        403,
      );
    });
  });
}
