// keyroll's picture of external-secrets (issue 28 items 1–3), on the real Kubernetes API server
// with the stand-in that plays external-secrets (test/support/consumer-cluster.ts; this API server has no controller):
// - a sync is proved from the controller's status, never from the answer to keyroll's own patch:
//   by syncedResourceVersion (external-secrets' hash of the metadata it read, keyroll's force-sync
//   value in it) without waiting for a later second, else by a refresh in a later second than the
//   store, with one re-ask at most when it fell in the store's own second;
// - an ExternalSecret whose refresh settings switch force-sync off fails at once, naming the fix,
//   and the workload behind it is not restarted onto the old value (nor behind any failed sync),
//   nor shown `current` by `keyroll status`;
// - `keyroll validate` reads each consumer live and exits 2 naming the one keyroll could not refresh.
import { describe, expect, it } from 'vitest';
import { ConsumerError } from '../../../src/consumers/errors.ts';
import { FORCE_SYNC, syncExternalSecret } from '../../../src/consumers/kinds/external-secret.ts';
import type { KubeClient } from '../../../src/consumers/kubernetes/client.ts';
import { consumerStatuses } from '../../../src/consumers/status.ts';
import { policyYaml, useCliFixture } from '../../cli/harness.ts';
import { keyPolicy } from '../../rotation/harness.ts';
import { kubeApiServer } from '../servers.ts';
import { consumerNamespace, type ConsumerNamespace } from '../../support/consumer-cluster.ts';
import { LEAK, useConsumerBench } from '../../support/consumer-bench.ts';

const server = await kubeApiServer();
const KEY = 'key_demo_billing';

/** keyroll's client, counting the force-sync patches it sends. */
function countingForceSyncs(client: KubeClient): { client: KubeClient; values: string[] } {
  const values: string[] = [];
  const counting: KubeClient = {
    get: (ref, signal) => client.get(ref, signal),
    watch: (ref, version, onChange, signal) => client.watch(ref, version, onChange, signal),
    servedVersions: (group, signal) => client.servedVersions(group, signal),
    mayI: (verb, ref, signal) => client.mayI(verb, ref, signal),
    patch: (ref, patch, type, signal) => {
      const value = (patch as { metadata?: { annotations?: Record<string, string> } }).metadata
        ?.annotations?.[FORCE_SYNC];
      if (ref.plural === 'externalsecrets' && value !== undefined) values.push(value);
      return client.patch(ref, patch, type, signal);
    },
  };
  return { client: counting, values };
}

if (server === undefined) {
  describe.skip('external-secrets as keyroll finds it, on a real Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const cli = useCliFixture();
  const fixture = useConsumerBench();

  async function namespaceWith(
    externalSecret: { refreshInterval?: string; refreshPolicy?: string } = {},
  ): Promise<ConsumerNamespace> {
    const cluster = await consumerNamespace(kube, cli.dir, (namespace) => [
      { namespace, externalSecrets: ['billing-api-key'], deployments: ['billing'] },
    ]);
    await cluster.createExternalSecret('billing-api-key', externalSecret);
    // external-secrets synced it when it was made (its first reconcile), an hour ago.
    await cluster.markSynced('billing-api-key');
    await cluster.createDeployment('billing');
    return cluster;
  }

  function esRef(cluster: ConsumerNamespace) {
    return {
      group: 'external-secrets.io',
      version: 'v1',
      plural: 'externalsecrets',
      namespace: cluster.namespace,
      name: 'billing-api-key',
    };
  }

  describe('the proof of a sync (item 2)', () => {
    it('a controller whose every sync falls in the store second, without a syncedResourceVersion keyroll can check: asked twice at most, then waited for, never asked every second', async () => {
      const cluster = await namespaceWith();
      const storedAtMs = Date.now();
      // Its clock stands still in the second of the store: no sync it reports can prove itself by time.
      const controllers = fixture.standIns(cluster, {
        syncedResourceVersion: 'none',
        clock: () => storedAtMs,
        syncDelayMs: 50,
      });
      const counted = countingForceSyncs(cluster.client);

      const error = await syncExternalSecret(counted.client, esRef(cluster), storedAtMs, {
        timeoutMs: 3_500,
        now: () => Date.now(),
      }).catch((caught: unknown) => caught);

      expect(error).toBeInstanceOf(ConsumerError);
      expect((error as ConsumerError).code).toBe('KR_CONSUMER_TIMEOUT');
      // Once, then once more in the next second; the syncs external-secrets did for both were seen in the status, not in a patch's answer.
      expect(counted.values).toHaveLength(2);
      expect(controllers.syncs.get('billing-api-key')?.length).toBeGreaterThanOrEqual(2);
    });

    it("a sync in the store's own second is proved by syncedResourceVersion: one ask, no wait for the next second", async () => {
      const cluster = await namespaceWith();
      const storedAtMs = Date.now();
      fixture.standIns(cluster, { clock: () => storedAtMs, syncDelayMs: 50 });
      const counted = countingForceSyncs(cluster.client);

      const result = await syncExternalSecret(counted.client, esRef(cluster), storedAtMs, {
        timeoutMs: 5_000,
        now: () => Date.now(),
      });

      expect(result).toMatchObject({ asks: 1, proof: 'synced-resource-version' });
      expect(counted.values).toHaveLength(1);
      const es = await cluster.readExternalSecret('billing-api-key');
      expect(es.metadata?.annotations?.[FORCE_SYNC]).toBe(counted.values[0]);
    });

    it('the status from before keyroll asked (an older syncedResourceVersion, a refresh in the store second) proves nothing', async () => {
      const cluster = await namespaceWith();
      // external-secrets does nothing: only the status it wrote an hour ago is there.
      fixture.standIns(cluster, { ignoredSyncs: new Set(['billing-api-key']) });
      const before = (await cluster.readExternalSecret('billing-api-key')).status as { refreshTime: string };
      const error = await syncExternalSecret(cluster.client, esRef(cluster), Date.parse(before.refreshTime), {
        timeoutMs: 2_500,
        now: () => Date.now(),
      }).catch((caught: unknown) => caught);
      expect((error as ConsumerError).code).toBe('KR_CONSUMER_TIMEOUT');
    });
  });

  describe('refresh settings that switch force-sync off (item 3)', () => {
    it.each([
      ['refreshInterval: 0', { refreshInterval: '0' }, 'refreshInterval is 0'],
      ['refreshPolicy: CreatedOnce', { refreshPolicy: 'CreatedOnce' }, 'CreatedOnce'],
    ])(
      '%s: KR_CONSUMER_FORCE_SYNC_OFF at once with the fix, and the Deployment behind it not restarted (KR_CONSUMER_SYNC_BLOCKED)',
      async (_name, spec, cause) => {
        const cluster = await namespaceWith(spec);
        const controllers = fixture.standIns(cluster, { syncDelayMs: 50, rolloutMs: 50 });
        const bench = await fixture.start(cluster.client, [
          {
            id: KEY,
            consumers: [
              { kind: 'externalSecret', namespace: cluster.namespace, name: 'billing-api-key' },
              { kind: 'deployment', namespace: cluster.namespace, name: 'billing' },
            ],
          },
        ]);
        const counted = countingForceSyncs(cluster.client);

        const { summary, report } = await bench.run(
          [KEY],
          LEAK,
          bench.refresher({ syncTimeoutMs: 5_000 }, counted.client),
        );

        expect(summary.rotated).toBe(1);
        expect(report).toMatchObject({ refreshed: 0, failed: 2 });
        const failed = bench.events('consumer.failed');
        expect(failed.map((event) => [event.consumerKind, event.errorCode])).toEqual([
          ['externalSecret', 'KR_CONSUMER_FORCE_SYNC_OFF'],
          ['deployment', 'KR_CONSUMER_SYNC_BLOCKED'],
        ]);
        expect(String(failed[0]?.error)).toContain(cause);
        expect(String(failed[0]?.nextAction)).toContain('refreshPolicy: OnChange');
        // Not asked (it would not be acted on), not restarted (its pods would start on the old value).
        expect(counted.values).toEqual([]);
        expect(controllers.restartsOf('billing')).toHaveLength(0);
        expect(bench.bench.alerter.alerts[0]?.alert.summary).toContain(
          'billing-api-key (KR_CONSUMER_FORCE_SYNC_OFF)',
        );
      },
    );
  });

  describe('a workload whose ExternalSecret did not sync (item 1)', () => {
    it('is not restarted onto the old value, reported blocked on the sync, and never shown current by status', async () => {
      const cluster = await namespaceWith();
      const controllers = fixture.standIns(cluster, {
        failingSyncs: new Set(['billing-api-key']),
        rolloutMs: 50,
      });
      const bench = await fixture.start(cluster.client, [
        {
          id: KEY,
          consumers: [
            { kind: 'externalSecret', namespace: cluster.namespace, name: 'billing-api-key' },
            { kind: 'deployment', namespace: cluster.namespace, name: 'billing' },
          ],
        },
      ]);

      const { summary, report } = await bench.run([KEY], LEAK);

      expect(report).toMatchObject({ refreshed: 0, failed: 2 });
      expect(bench.events('consumer.failed').map((event) => event.errorCode)).toEqual([
        'KR_CONSUMER_SYNC_FAILED',
        'KR_CONSUMER_SYNC_BLOCKED',
      ]);
      expect(bench.events('consumer.refreshed')).toEqual([]);
      expect(controllers.restartsOf('billing')).toHaveLength(0);
      const key = bench.bench.policy.keys.find((candidate) => candidate.id === KEY);
      if (key === undefined) throw new Error('no key');
      const statuses = await consumerStatuses(
        key,
        { lastRotatedAt: new Date().toISOString(), lastRotationId: summary.outcomes[0]?.rotationId },
        cluster.client,
      );
      expect(statuses.map((status) => [status.consumer.split('/').at(-1), status.state])).toEqual([
        ['billing-api-key', 'stale'],
        // The restart is still owed: the next run or sweep picks it up once the sync works.
        ['billing', 'owed'],
      ]);
    });

    it('restarted by hand before its ExternalSecret synced: stale, not current', async () => {
      const cluster = await namespaceWith();
      fixture.standIns(cluster, { ignoredSyncs: new Set(['billing-api-key']) });
      const rotatedAt = new Date(Date.now() - 2_000).toISOString();
      // `kubectl rollout restart` after the rotation, while the Secret still holds the old value.
      const deployment = workloadPatch(new Date().toISOString().slice(0, 19) + 'Z');
      await cluster.client.patch(
        {
          group: 'apps',
          version: 'v1',
          plural: 'deployments',
          namespace: cluster.namespace,
          name: 'billing',
        },
        deployment,
        'strategic',
      );
      const key = keyPolicy(KEY, 'org_demo_acme', {
        consumers: [
          { kind: 'externalSecret', namespace: cluster.namespace, name: 'billing-api-key' },
          { kind: 'deployment', namespace: cluster.namespace, name: 'billing' },
        ],
      });
      await new Promise((resolve) => setTimeout(resolve, 300));

      const statuses = await consumerStatuses(
        key,
        { lastRotatedAt: rotatedAt, lastRotationId: 'rot-not-restarted-for' },
        cluster.client,
      );

      expect(statuses.map((status) => status.state)).toEqual(['stale', 'stale']);
      expect(statuses[1]?.detail).toContain('billing-api-key synced the new value');
    });
  });

  describe('keyroll validate reads every consumer live', () => {
    it('exits 2 naming each consumer it could not refresh: missing, not in the Role, force-sync off; the sound ones pass', async () => {
      const cluster = await consumerNamespace(kube, cli.dir, (namespace) => [
        { namespace, externalSecrets: ['billing-api-key', 'fetch-once', 'gone'], deployments: ['billing'] },
      ]);
      await cluster.createExternalSecret('billing-api-key');
      await cluster.createExternalSecret('fetch-once', { refreshInterval: '0' });
      await cluster.createDeployment('billing');
      // Exists, but the Role does not name it.
      await cluster.createDeployment('reporting');
      const ns = cluster.namespace;
      const consumers = [
        'externalSecret billing-api-key',
        'externalSecret fetch-once',
        'externalSecret gone',
        'deployment billing',
        'deployment reporting',
      ]
        .map((entry) => entry.split(' '))
        .map(([kind, name]) => `      - { kind: ${String(kind)}, namespace: ${ns}, name: ${String(name)} }\n`)
        .join('');
      const policy = policyYaml({ baseUrl: cli.emulator.url })
        .replace('    maxAge: 7d\n', `    maxAge: 7d\n    consumers:\n${consumers}`)
        .replace('keys:\n', `consumers:\n  kubernetes: { kubeconfig: ${cluster.kubeconfigFile} }\nkeys:\n`);
      await cli.writeFile('policy.yaml', policy);

      const result = await cli.run(['validate', '-p', 'policy.yaml']);

      expect(result.code).toBe(2);
      const line = (name: string): string =>
        result.stdout
          .split('\n')
          .find((candidate) => candidate.includes(`/${name} `) || candidate.includes(`/${name} —`)) ?? '';
      expect(line('billing-api-key')).toMatch(
        /^ok {4}consumer externalSecret .*\/billing-api-key — key_demo_billing: exists \(external-secrets\.io\/v1\); get, patch and watch allowed; force-sync works/,
      );
      expect(line('billing')).toMatch(/^ok {4}consumer deployment /);
      expect(line('fetch-once')).toMatch(
        /^FAIL {2}consumer externalSecret .*refreshInterval is 0.*\[KR_CONSUMER_FORCE_SYNC_OFF\]$/,
      );
      expect(line('gone')).toMatch(/^FAIL {2}consumer externalSecret .*\[KR_CONSUMER_NOT_FOUND\]$/);
      expect(line('reporting')).toMatch(
        /^FAIL {2}consumer deployment .*keyroll may not get or patch deployments .*consumerAccess.*\[KR_CONSUMER_FORBIDDEN\]$/,
      );
      expect(cli.emulator.state.totalRolls()).toBe(0);
    });
  });
}

/** `kubectl rollout restart`'s patch. */
function workloadPatch(restartedAt: string): object {
  return {
    spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': restartedAt } } } },
  };
}
