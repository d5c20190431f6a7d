// The consumers' refresh against the real controllers (issue 28): external-secrets, each release
// scripts/test-controllers.sh built (the newest that builds from the Go module proxy, and the
// oldest that serves external-secrets.io/v1), reading the OpenBao the run started, and
// kube-controller-manager's deployment and replicaset controllers, on an API server of their own
// (test/support/kube-controllers.ts). keyroll acts as its service account, bound by the chart's
// Role. The one stand-in left is the kubelet (StandInKubelet): it starts the pods the ReplicaSets
// create and records the value each one got.
//
// The stand-in tests (refresh.test.ts, failures.test.ts, windows.test.ts, cli-status.test.ts) stay
// for what a real controller cannot be made to do on cue: a sync that fails or never comes, a
// rollout stuck or slow for a set time, a StatefulSet with OnDelete, a DaemonSet (no nodes here).
//
// The figures (store → Secret holding the new value, store → every new pod Ready) are printed after
// the file, p50 and p99 over every rotation here; no assertion depends on them.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readControllerTools, startRealCluster, type RealCluster } from '../../support/kube-controllers.ts';
import { useTempDir } from '../../support/temp-dir.ts';
import { realControllersTools, vaultServer } from '../servers.ts';
import { LEAK } from '../../support/consumer-bench.ts';
import { realConsumers, REPLICAS, SecretWatcher, type RealConsumers } from './real-cluster.ts';

const ROTATIONS = 3;

const tools = realControllersTools();
const vault = vaultServer();
const installed = tools === undefined ? undefined : await readControllerTools(tools.controllersDir);

/** Each rotation's figures, for the summary printed after the file. */
const figures: { release: string; storeToSecretMs: number; storeToPodsReadyMs: number }[] = [];

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

if (tools === undefined || vault === undefined || installed === undefined) {
  describe.skip('consumers against the real controllers (not built; see the global setup message)', () => {
    it('needs kube-controller-manager and external-secrets', () => undefined);
  });
} else {
  const { kubeBinDir } = tools;
  const openBao = vault;
  const temp = useTempDir('keyroll-real-controllers-', 'file');

  afterAll(() => {
    if (figures.length === 0) return;
    const summary = (pick: (figure: (typeof figures)[number]) => number): string => {
      const values = figures.map(pick);
      return `p50 ${String(percentile(values, 50))} ms, p99 ${String(percentile(values, 99))} ms`;
    };
    console.log(
      `keyroll real controllers (${String(figures.length)} rotations, ${[...new Set(figures.map((figure) => figure.release))].join(', ')}): ` +
        `store → Secret holds the new value ${summary((figure) => figure.storeToSecretMs)}; store → every new pod Ready ${summary((figure) => figure.storeToPodsReadyMs)}`,
    );
  });

  describe.each(installed.externalSecrets)(
    'external-secrets $version and kube-controller-manager',
    ({ version, binary, crds }) => {
      let real: RealCluster | undefined;
      let consumers: RealConsumers;

      beforeAll(async () => {
        real = await startRealCluster({
          kubeBinDir,
          tools: installed,
          crds,
          externalSecrets: { binary, vault: { address: openBao.address, token: openBao.rootToken } },
        });
        consumers = await realConsumers(real, openBao, temp.path());
      }, 300_000);

      afterAll(async () => {
        await consumers.close();
        await real?.stop();
      });

      it(`${String(ROTATIONS)} leak rotations: each force-syncs the ExternalSecret, the Secret holds the stored value, the Deployment rolls out exactly one new ReplicaSet whose every pod got that value, and keyroll reports both refreshed`, async () => {
        const { bench, keyId, secretName, kubelet } = consumers;
        for (let round = 1; round <= ROTATIONS; round++) {
          const before = new Set(
            (await consumers.replicaSets()).map((replicaSet) => replicaSet.metadata?.name),
          );
          const watcher = new SecretWatcher(consumers);
          const { summary, report } = await bench.run([keyId], LEAK).finally(() => watcher.stop());
          const context = `round ${String(round)} on external-secrets ${version}; controllers said:\n${real?.controllerOutput() ?? ''}`;

          expect(summary.rotated, context).toBe(1);
          expect(report, context).toMatchObject({ refreshed: 2, failed: 0, deferred: 0, skipped: 0 });
          // The Kubernetes Secret holds what keyroll stored in OpenBao: external-secrets synced on
          // keyroll's force-sync (its refreshInterval is an hour).
          const stored = await consumers.storedDigest();
          expect(await consumers.secretDigest()).toBe(stored);

          // Exactly one new ReplicaSet, now the only one with replicas, and every pod of it started
          // on the stored value.
          const after = await consumers.replicaSets();
          const created = after.filter((replicaSet) => !before.has(replicaSet.metadata?.name));
          expect(created.map((replicaSet) => replicaSet.metadata?.name)).toHaveLength(1);
          const fresh = created[0]?.metadata?.name ?? '';
          expect(
            after
              .filter((replicaSet) => (replicaSet.spec?.replicas ?? 0) > 0)
              .map((replicaSet) => replicaSet.metadata?.name),
          ).toEqual([fresh]);
          const pods = kubelet.podsOf(fresh);
          expect(pods).toHaveLength(REPLICAS);
          expect(pods.map((pod) => pod.values[`${secretName}/apiKey`])).toEqual(pods.map(() => stored));

          // keyroll reports both consumers refreshed for this rotation.
          const rotationId = summary.outcomes[0]?.rotationId ?? '';
          const refreshed = bench
            .events('consumer.refreshed')
            .filter((event) => Array.isArray(event.rotationIds) && event.rotationIds.includes(rotationId));
          expect(refreshed.map((event) => event.consumerKind).sort()).toEqual([
            'deployment',
            'externalSecret',
          ]);

          const storedAt = Date.parse(
            bench.events('key.stored').filter((event) => event.rotationId === rotationId)[0]?.time ?? '',
          );
          const secretAt = watcher.firstSeen(stored);
          if (secretAt !== undefined && !Number.isNaN(storedAt)) {
            figures.push({
              release: version,
              storeToSecretMs: secretAt - storedAt,
              storeToPodsReadyMs: Math.max(...pods.map((pod) => pod.readyAtMs)) - storedAt,
            });
          }
        }
      }, 240_000);
    },
  );
}
