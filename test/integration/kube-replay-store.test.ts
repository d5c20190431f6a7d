// The replay records every daemon replica shares (--replay-store kubernetes), on the real
// kube-apiserver, in the ConfigMaps and under the Role the chart renders (helm template, applied as
// is) with keyroll's own service account: a request one replica accepted is a replay to another
// and to a replacement; of replicas claiming one id at once exactly one gets it; a claim the API
// server does not take (forbidden, unreachable) refuses the request; expired ids are pruned; a
// full record fits one ConfigMap. Then the same at the HTTP level, with two daemons.
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import {
  ApiException,
  CoreV1Api,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type V1RoleBinding,
} from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { entryKey, REPLAY_HEADER_KEY } from '../../src/inbound/kube-replay-record.ts';
import { claimOrRefuse, ReplayRecordError, type ReplayClaim } from '../../src/inbound/replay-claim.ts';
import { replayConfigMapName, ReplayRecords, type ReplayStore } from '../../src/inbound/replay-records.ts';
import { DEFAULT_REPLAY_CAPACITY } from '../../src/inbound/replay-record.ts';
import type { Daemon } from '../../src/daemon/daemon.ts';
import {
  keyYaml,
  postTrigger,
  startDaemonBench,
  TRIGGER_KEYS,
  type DaemonBench,
} from '../support/daemon-bench.ts';
import { secretScanningWebhook } from '../support/fake-github.ts';
import { deliver, intakePolicy, startWithIntake, useGithubBench } from '../leaks/github/support.ts';
import {
  adminKubeConfig,
  serviceAccountCredentials,
  type KubeApiServerInfo,
} from '../support/kube-apiserver.ts';
import { renderConsumerTemplates } from '../support/consumer-cluster.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
/** The chart's names for release `keyroll`: service account `keyroll`, ConfigMaps `keyroll-replay-<source>`. */
const ACCOUNT = 'keyroll';
const PREFIX = 'keyroll-replay';
const NOW = 1_900_000_000;
const WINDOW = 300;
const CHART_SETTINGS = ['cronjob.enabled=false', 'daemon.enabled=true', 'daemon.replayStore=kubernetes'];

/** A namespace holding what the chart renders for the shared store, and keyroll's account's client config. */
async function chartNamespace(
  kube: KubeApiServerInfo,
): Promise<{ namespace: string; asKeyroll: KubeConfig }> {
  const namespace = `keyroll-replay-${randomBytes(4).toString('hex')}`;
  const { kubeConfig } = await serviceAccountCredentials(kube, namespace, ACCOUNT);
  const admin = adminKubeConfig(kube);
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const objects = await renderConsumerTemplates(namespace, [], ['templates/replay-store.yaml'], {
    set: CHART_SETTINGS,
  });
  expect(objects.map((object) => object.kind)).toEqual([
    'ConfigMap',
    'ConfigMap',
    'ConfigMap',
    'Role',
    'RoleBinding',
  ]);
  for (const object of objects) {
    if (object.kind === 'ConfigMap') await core.createNamespacedConfigMap({ namespace, body: object });
    if (object.kind === 'Role') await rbac.createNamespacedRole({ namespace, body: object });
    if (object.kind === 'RoleBinding')
      await rbac.createNamespacedRoleBinding({ namespace, body: object as V1RoleBinding });
  }
  return { namespace, asKeyroll: kubeConfig };
}

const storeOf = (
  namespace: string,
  kubeConfig: KubeConfig,
): Extract<ReplayStore, { kind: 'kubernetes' }> => ({
  kind: 'kubernetes',
  namespace,
  prefix: PREFIX,
  kubeConfig,
});

/** A replica's records, as one daemon process holds them. */
const replica = (namespace: string, kubeConfig: KubeConfig, now = NOW, capacity?: number): ReplayRecords =>
  new ReplayRecords(storeOf(namespace, kubeConfig), () => now, capacity);

async function configMapData(
  kube: KubeApiServerInfo,
  namespace: string,
  name: string,
): Promise<Record<string, string>> {
  return (
    (await adminKubeConfig(kube).makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace, name }))
      .data ?? {}
  );
}

async function statusOf(call: () => Promise<unknown>): Promise<number | 'allowed'> {
  try {
    await call();
    return 'allowed';
  } catch (error) {
    if (error instanceof ApiException) return error.code;
    throw error;
  }
}

/** A TCP relay to the API server that the test can cut: the API server unreachable, for real. */
async function startRelay(target: string): Promise<{ url: string; cut: () => Promise<void> }> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  const relay: Server = createServer((client) => {
    const upstream = connect(Number(port), hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  const address = relay.address() as AddressInfo;
  return {
    url: `https://127.0.0.1:${String(address.port)}`,
    cut: async () => {
      const closed = new Promise<void>((resolve) => {
        relay.close(() => {
          resolve();
        });
      });
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

if (server === undefined) {
  describe.skip('shared replay records (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;

  describe('shared replay records in the chart ConfigMaps (kube-apiserver)', () => {
    it('a trigger accepted by replica A is a replay to replica B, and to a new instance that replaced A', async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      const a = await replica(namespace, asKeyroll).open('trigger');
      expect(a.origin).toBe('new');
      const b = await replica(namespace, asKeyroll, NOW + 1).open('trigger');
      expect(b.origin).toBe('loaded');
      expect(await a.claim('alice\nnonce-1', NOW + WINDOW, NOW, NOW)).toBe('claimed');
      expect(await b.claim('alice\nnonce-1', NOW + WINDOW, NOW + 2, NOW)).toBe('replay');
      // A is gone (a new pod): its replacement reads the same object.
      const replacement = await replica(namespace, asKeyroll, NOW + 30).open('trigger');
      expect(replacement.origin).toBe('loaded');
      expect(await replacement.claim('alice\nnonce-1', NOW + WINDOW, NOW + 30, NOW)).toBe('replay');
      expect(await replacement.claim('alice\nnonce-2', NOW + WINDOW, NOW + 30, NOW + 29)).toBe('claimed');
      // The record began when A first opened it, not when the replacement did: a request signed
      // between the two is not refused as signed-before-start.
      expect(await replacement.claim('alice\nnonce-3', NOW + WINDOW, NOW + 30, NOW + 10)).toBe('claimed');
      expect(await replacement.claim('alice\nnonce-4', NOW + WINDOW, NOW + 30, NOW - 1)).toBe(
        'signed-before-start',
      );
      // Each source is its own object: the GitHub record does not know the trigger's id.
      expect(
        await (await replica(namespace, asKeyroll).open('github')).claim('alice\nnonce-1', NOW + 3600, NOW),
      ).toBe('claimed');
      const data = await configMapData(kube, namespace, replayConfigMapName(PREFIX, 'trigger'));
      expect(data[entryKey('alice\nnonce-1')]).toBe(String(NOW + WINDOW));
      expect(JSON.parse(data[REPLAY_HEADER_KEY] ?? '')).toEqual({ version: 1, notBefore: NOW });
      // Nothing a sender chose is kept as it sent it.
      expect(JSON.stringify(data)).not.toContain('nonce');
    });

    it('of three replicas claiming the same ids at once, exactly one gets each id (resourceVersion conflicts re-read and decided again)', async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      const replicas = await Promise.all([0, 1, 2].map(() => replica(namespace, asKeyroll).open('github')));
      const ids = Array.from({ length: 20 }, (_, index) => `delivery-digest-${String(index)}`);
      // Each replica claims every id, one request at a time as webhooks arrive, all replicas at once.
      const answers = await Promise.all(
        replicas.map(async (record) => {
          const mine: ReplayClaim[] = [];
          for (const id of ids) mine.push(await record.claim(id, NOW + 3600, NOW));
          return mine;
        }),
      );
      for (const [index] of ids.entries()) {
        const forId = answers.map((mine) => mine[index]);
        expect(
          forId.filter((answer) => answer === 'claimed'),
          ids[index],
        ).toHaveLength(1);
        expect(
          forId.filter((answer) => answer === 'replay'),
          ids[index],
        ).toHaveLength(2);
      }
      const data = await configMapData(kube, namespace, replayConfigMapName(PREFIX, 'github'));
      expect(Object.keys(data)).toHaveLength(ids.length + 1);
    });

    it('prunes expired ids on the next write', async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      const record = await replica(namespace, asKeyroll).open('gitguardian');
      expect(await record.claim('signature-old', NOW + 5, NOW, NOW)).toBe('claimed');
      expect(await record.claim('signature-live', NOW + WINDOW, NOW, NOW)).toBe('claimed');
      expect(
        Object.keys(await configMapData(kube, namespace, replayConfigMapName(PREFIX, 'gitguardian'))),
      ).toContain(entryKey('signature-old'));
      expect(await record.claim('signature-new', NOW + 10 + WINDOW, NOW + 10, NOW + 10)).toBe('claimed');
      const data = await configMapData(kube, namespace, replayConfigMapName(PREFIX, 'gitguardian'));
      expect(Object.keys(data).sort()).toEqual(
        [REPLAY_HEADER_KEY, entryKey('signature-live'), entryKey('signature-new')].sort(),
      );
      // Past its expiry the id is new again (the signature's timestamp window refuses it by then).
      expect(await record.claim('signature-old', NOW + 10 + WINDOW, NOW + 10, NOW + 10)).toBe('claimed');
    });

    it('an object emptied by hand starts afresh: what was signed before is refused (signed-before-start), as after a lost file', async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      const record = await replica(namespace, asKeyroll).open('trigger');
      expect(await record.claim('alice\nnonce-1', NOW + WINDOW, NOW, NOW)).toBe('claimed');
      const core = adminKubeConfig(kube).makeApiClient(CoreV1Api);
      const name = replayConfigMapName(PREFIX, 'trigger');
      const current = await core.readNamespacedConfigMap({ namespace, name });
      await core.replaceNamespacedConfigMap({
        namespace,
        name,
        body: { metadata: { name, namespace, resourceVersion: current.metadata?.resourceVersion }, data: {} },
      });
      // The replica's copy is stale: its write conflicts, it reads the empty object and refuses what it cannot judge.
      expect(await record.claim('alice\nnonce-9', NOW + 5 + WINDOW, NOW + 20, NOW + 5)).toBe(
        'signed-before-start',
      );
      expect(await record.claim('alice\nnonce-1', NOW + WINDOW, NOW + 20, NOW)).toBe('signed-before-start');
      expect(await record.claim('alice\nnonce-2', NOW + 20 + WINDOW, NOW + 20, NOW + 20)).toBe('claimed');
      expect(JSON.parse((await configMapData(kube, namespace, name))[REPLAY_HEADER_KEY] ?? '')).toEqual({
        version: 1,
        notBefore: NOW + 20,
      });
    });

    it(`holds ${String(DEFAULT_REPLAY_CAPACITY)} live entries in one ConfigMap (under its 1 MiB), then answers full`, async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      const record = await replica(namespace, asKeyroll).open('github');
      const ids = Array.from({ length: DEFAULT_REPLAY_CAPACITY }, (_, index) => `digest-${String(index)}`);
      const answers = await Promise.all(ids.map((id) => record.claim(id, NOW + 3600, NOW)));
      expect(answers.every((answer) => answer === 'claimed')).toBe(true);
      expect(await record.claim('one-more', NOW + 3600, NOW)).toBe('full');
      const data = await configMapData(kube, namespace, replayConfigMapName(PREFIX, 'github'));
      expect(Object.keys(data)).toHaveLength(DEFAULT_REPLAY_CAPACITY + 1);
      const bytes = Object.entries(data).reduce((sum, [key, value]) => sum + key.length + value.length, 0);
      console.log(
        `replay record at capacity: ${String(DEFAULT_REPLAY_CAPACITY)} entries, ${String(bytes)} bytes of ConfigMap data (limit 1,048,576)`,
      );
    });

    it("the chart's Role lets keyroll get and update its three ConfigMaps and nothing else (no create, no other ConfigMap)", async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      await adminKubeConfig(kube)
        .makeApiClient(CoreV1Api)
        .createNamespacedConfigMap({ namespace, body: { metadata: { name: 'other' }, data: { a: 'b' } } });
      const core = asKeyroll.makeApiClient(CoreV1Api);
      expect(
        await statusOf(() =>
          core.readNamespacedConfigMap({ namespace, name: replayConfigMapName(PREFIX, 'trigger') }),
        ),
      ).toBe('allowed');
      expect(await statusOf(() => core.readNamespacedConfigMap({ namespace, name: 'other' }))).toBe(403);
      expect(
        await statusOf(() =>
          core.createNamespacedConfigMap({ namespace, body: { metadata: { name: `${PREFIX}-extra` } } }),
        ),
      ).toBe(403);
      expect(
        await statusOf(() =>
          core.deleteNamespacedConfigMap({ namespace, name: replayConfigMapName(PREFIX, 'trigger') }),
        ),
      ).toBe(403);
      expect(await statusOf(() => core.listNamespacedConfigMap({ namespace }))).toBe(403);
    });

    it('a record the account may not write does not open (the daemon does not start), and one that loses the right refuses the request', async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      const { kubeConfig: stranger } = await serviceAccountCredentials(kube, namespace, 'not-keyroll');
      const refused = replica(namespace, stranger).open('trigger');
      await expect(refused).rejects.toBeInstanceOf(ReplayRecordError);
      await expect(refused).rejects.toMatchObject({ code: 'KR_REPLAY_RECORD', status: 403 });

      const record = await replica(namespace, asKeyroll).open('trigger');
      await adminKubeConfig(kube)
        .makeApiClient(RbacAuthorizationV1Api)
        .deleteNamespacedRoleBinding({ namespace, name: PREFIX });
      await expect
        .poll(() => claimOrRefuse(record, `alice\n${randomBytes(8).toString('hex')}`, NOW + WINDOW, NOW, NOW))
        .toEqual({ why: 'replay-record-unavailable' });
    });

    it('refuses the request when the API server cannot be reached, and claims again once it can', async () => {
      const { namespace } = await chartNamespace(kube);
      const relay = await startRelay(kube.server);
      const { kubeConfig } = await serviceAccountCredentials(
        { ...kube, server: relay.url },
        namespace,
        ACCOUNT,
      );
      const record = await replica(namespace, kubeConfig).open('trigger');
      expect(await record.claim('alice\nbefore', NOW + WINDOW, NOW, NOW)).toBe('claimed');
      await relay.cut();
      expect(await claimOrRefuse(record, 'alice\nduring', NOW + WINDOW, NOW, NOW)).toEqual({
        why: 'replay-record-unavailable',
      });
      // What was not written was not kept: another replica, reaching the API server, can still claim it.
      const { kubeConfig: asKeyroll } = await serviceAccountCredentials(kube, namespace, ACCOUNT);
      expect(
        await (
          await replica(namespace, asKeyroll).open('trigger')
        ).claim('alice\nduring', NOW + WINDOW, NOW, NOW),
      ).toBe('claimed');
    });
  });

  describe('two daemons taking GitHub deliveries on the shared store (HTTP)', () => {
    const benches = useGithubBench();

    it('a GitHub delivery accepted by daemon A, sent again to daemon B under a fresh delivery id, is a replay (409): the alert is fetched once', async () => {
      const bench = benches.bench();
      const github = benches.github();
      const { namespace, asKeyroll } = await chartNamespace(kube);
      await bench.writePolicyText(intakePolicy(bench, github));
      const [a, b] = [
        await startWithIntake(bench, github, { replayStore: storeOf(namespace, asKeyroll) }),
        await startWithIntake(bench, github, { replayStore: storeOf(namespace, asKeyroll) }),
      ];
      const body = secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number: 30 });
      expect((await deliver(a, body, { delivery: randomUUID() })).status).toBe(202);
      expect((await deliver(b, body, { delivery: randomUUID() })).status).toBe(409);
      await Promise.all([a.idle(), b.idle()]);
      expect(github.requests.filter((request) => request.method === 'GET')).toHaveLength(1);
      expect(bench.events('leak.intake.accepted')).toHaveLength(1);
    });
  });

  describe('two daemons on the shared store (HTTP)', () => {
    const BILLING = 'key_demo_billing';
    let bench: DaemonBench;

    beforeEach(async () => {
      bench = await startDaemonBench();
      await bench.writePolicy(keyYaml(BILLING, 'schedule: "0 3 * * 1"'));
    });

    afterEach(async () => {
      await bench.close();
    });

    const startReplica = async (kubeConfig: KubeConfig, namespace: string): Promise<Daemon> => {
      const daemon = await bench.start({
        triggerKeys: TRIGGER_KEYS,
        replayStore: storeOf(namespace, kubeConfig),
      });
      await daemon.idle();
      return daemon;
    };

    it('a signed trigger accepted by daemon A is refused as a replay (409) by daemon B and by the daemon that replaced A, and rolls once', async () => {
      const { namespace, asKeyroll } = await chartNamespace(kube);
      const a = await startReplica(asKeyroll, namespace);
      const b = await startReplica(asKeyroll, namespace);
      const rolls = bench.emulator.state.rollCount(BILLING);
      const request = {
        body: JSON.stringify({ keys: [BILLING], reason: 'leak', ticket: 'INC-30' }),
        nonce: randomBytes(16).toString('hex'),
        timestamp: Math.floor(Date.now() / 1000),
      };
      expect((await postTrigger(a, request)).status).toBe(202);
      await a.idle();
      const replayed = await postTrigger(b, request);
      expect(replayed.status).toBe(409);
      expect(replayed.json).toMatchObject({ error: { code: 'replay' } });
      await a.shutdown();
      const replacement = await startReplica(asKeyroll, namespace);
      expect((await postTrigger(replacement, request)).status).toBe(409);
      await Promise.all([b.idle(), replacement.idle()]);
      expect(bench.emulator.state.rollCount(BILLING)).toBe(rolls + 1);
      expect(bench.events('trigger.accepted')).toHaveLength(1);
      expect(bench.events('daemon.started')[0]).toMatchObject({
        replayStore: `kubernetes:${namespace}/${PREFIX}`,
        replayRecord: 'new',
      });
      expect(bench.events('daemon.started')[1]).toMatchObject({ replayRecord: 'loaded' });
    });

    it('a trigger whose claim cannot be written (API server unreachable) is refused (503) and starts nothing', async () => {
      const { namespace } = await chartNamespace(kube);
      const relay = await startRelay(kube.server);
      const { kubeConfig } = await serviceAccountCredentials(
        { ...kube, server: relay.url },
        namespace,
        ACCOUNT,
      );
      const daemon = await startReplica(kubeConfig, namespace);
      const rolls = bench.emulator.state.rollCount(BILLING);
      bench.audit.clear();
      await relay.cut();
      const answer = await postTrigger(daemon, { body: JSON.stringify({ keys: [BILLING], reason: 'leak' }) });
      expect(answer.status).toBe(503);
      expect(answer.json).toMatchObject({ error: { code: 'replay-record-unavailable' } });
      await daemon.idle();
      expect(bench.emulator.state.rollCount(BILLING)).toBe(rolls);
      expect(bench.events('trigger.accepted')).toEqual([]);
      expect(bench.events('run.started')).toEqual([]);
    });
  });
}
