// A cluster of external-secrets 0.14 or 0.15, which serve external-secrets.io v1beta1 and no v1
// (issue 28 item 1): keyroll finds the version by discovery and speaks it, where it used to send v1,
// get 404 for everything, report the ExternalSecret missing and restart the Deployment onto the old
// value anyway. Before any external-secrets CRD is installed, it names the release it needs. An API
// server of this file's own (etcd + kube-apiserver, as global-setup starts the shared one), since a
// CustomResourceDefinition is cluster-wide: the shared server serves v1 to the other files.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkConsumers } from '../../../src/consumers/check.ts';
import { FORCE_SYNC } from '../../../src/consumers/kinds/external-secret.ts';
import { RESTARTED_FOR } from '../../../src/consumers/markers.ts';
import { startKubeApiServer, type RunningKubeApiServer } from '../../support/kube-apiserver.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { keyPolicy } from '../../rotation/harness.ts';
import { kubeApiServer } from '../servers.ts';
import {
  consumerNamespace,
  EXTERNAL_SECRETS_CRD_V1BETA1,
  StandInControllers,
} from '../../support/consumer-cluster.ts';
import { consumerBench, LEAK } from '../../support/consumer-bench.ts';

const run = promisify(execFile);
const ROOT = new URL('../../../', import.meta.url).pathname;
const KEY = 'key_demo_billing';

// The shared server's answer says whether the tools exist (and fails the run under CI=true when not).
const shared = await kubeApiServer();

if (shared === undefined) {
  describe.skip('keyroll and external-secrets.io v1beta1 (kube-apiserver not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const temp = useTempDir('keyroll-es-v1beta1-');
  let kube: RunningKubeApiServer;

  beforeAll(async () => {
    // Built and cached already (the shared server runs from it): prints the directory at once.
    const { stdout } = await run(`${ROOT}scripts/test-kube.sh`, [], { cwd: ROOT, maxBuffer: 1 << 20 });
    kube = await startKubeApiServer(stdout.trim());
  }, 120_000);

  afterAll(async () => {
    await kube.stop();
  });

  describe('keyroll and a cluster that serves external-secrets.io v1beta1 only', () => {
    it('before external-secrets is installed: KR_CONSUMER_API_UNSERVED naming the release, in validate and in a run, and the Deployment not restarted', async () => {
      const cluster = await consumerNamespace(
        kube,
        temp.path(),
        (namespace) => [{ namespace, deployments: ['billing'] }],
        { crd: 'none' },
      );
      await cluster.createDeployment('billing');
      const controllers = new StandInControllers(cluster, { rolloutMs: 50 });
      const consumers = [
        { kind: 'externalSecret' as const, namespace: cluster.namespace, name: 'billing-api-key' },
        { kind: 'deployment' as const, namespace: cluster.namespace, name: 'billing' },
      ];
      const bench = await consumerBench(cluster.client, [{ id: KEY, consumers }]);
      try {
        const checks = await checkConsumers([keyPolicy(KEY, 'org_demo_acme', { consumers })], cluster.client);
        expect(checks[0]).toMatchObject({
          consumer: `externalSecret ${cluster.namespace}/billing-api-key`,
          ok: false,
          errorCode: 'KR_CONSUMER_API_UNSERVED',
        });
        expect(checks[0]?.detail).toContain('external-secrets v0.14 or later');

        const { report } = await bench.run([KEY], LEAK);

        expect(report).toMatchObject({ refreshed: 0, failed: 2 });
        expect(bench.events('consumer.failed').map((event) => event.errorCode)).toEqual([
          'KR_CONSUMER_API_UNSERVED',
          'KR_CONSUMER_SYNC_BLOCKED',
        ]);
        expect(controllers.restartsOf('billing')).toHaveLength(0);
      } finally {
        await controllers.stop();
        await bench.close();
      }
    });

    it("external-secrets 0.15's CRD: synced through v1beta1, then the Deployment restarted once, both refreshed", async () => {
      const cluster = await consumerNamespace(
        kube,
        temp.path(),
        (namespace) => [{ namespace, externalSecrets: ['billing-api-key'], deployments: ['billing'] }],
        { crd: EXTERNAL_SECRETS_CRD_V1BETA1, esVersion: 'v1beta1' },
      );
      await cluster.createExternalSecret('billing-api-key');
      await cluster.createDeployment('billing');
      const controllers = new StandInControllers(cluster, { syncDelayMs: 100, rolloutMs: 100 });
      const consumers = [
        { kind: 'externalSecret' as const, namespace: cluster.namespace, name: 'billing-api-key' },
        { kind: 'deployment' as const, namespace: cluster.namespace, name: 'billing' },
      ];
      const bench = await consumerBench(cluster.client, [{ id: KEY, consumers }]);
      try {
        const checks = await checkConsumers([keyPolicy(KEY, 'org_demo_acme', { consumers })], cluster.client);
        expect(checks.map((check) => check.ok)).toEqual([true, true]);
        expect(checks[0]?.detail).toContain('(external-secrets.io/v1beta1)');

        const { summary, report } = await bench.run([KEY], LEAK);

        expect(report).toMatchObject({ refreshed: 2, failed: 0 });
        expect(bench.events('consumer.failed')).toEqual([]);
        const es = await cluster.readExternalSecret('billing-api-key');
        expect(es.metadata?.annotations?.[FORCE_SYNC]).toMatch(/^\d{10}$/);
        const [restart] = controllers.restartsOf('billing');
        expect(controllers.restartsOf('billing')).toHaveLength(1);
        expect(restart?.atMs).toBeGreaterThan(
          Math.min(...(controllers.syncs.get('billing-api-key') ?? [Number.NaN])),
        );
        const deployment = await cluster.readWorkload('deployments', 'billing');
        expect(deployment.metadata?.annotations?.[RESTARTED_FOR]).toBe(summary.outcomes[0]?.rotationId);
      } finally {
        await controllers.stop();
        await bench.close();
      }
    });
  });
}
