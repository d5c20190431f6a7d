// `keyroll rotate --reason leak` and `keyroll status` as a person runs them outside the cluster
// (a kubeconfig acting as keyroll's service account, bound by the chart's Role): the leak reaches
// every consumer, and status then shows each consumer's last refresh as the cluster holds it. A
// workload the Role does not name is refused (403): the rotation stands, run exits 1 with the
// command to run by hand, and status shows that consumer as unreadable. The stand-in controllers
// (test/support/consumer-cluster.ts) play external-secrets and the deployment controller.
import { CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { policyYaml, useCliFixture } from '../../cli/harness.ts';
import { kubeApiServer } from '../servers.ts';
import {
  consumerNamespace,
  StandInControllers,
  type ConsumerNamespace,
} from '../../support/consumer-cluster.ts';

interface ConsumerStatusJson {
  consumer: string;
  state: string;
  lastRefreshAt: string | null;
  restartedFor?: string[];
  errorCode?: string;
}

interface StatusJson {
  keys: { keyId: string; lastRotationId: string | null; consumers?: ConsumerStatusJson[] }[];
}

const server = await kubeApiServer();

if (server === undefined) {
  describe.skip('keyroll status of consumers on a real Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const cli = useCliFixture();

  describe('keyroll status shows each consumer of a leaked key', () => {
    let cluster: ConsumerNamespace;
    let controllers: StandInControllers;

    beforeEach(async () => {
      cluster = await consumerNamespace(kube, cli.dir, (namespace) => [
        { namespace, externalSecrets: ['billing-api-key'], deployments: ['billing'] },
      ]);
      await cluster.createExternalSecret('billing-api-key');
      await cluster.createDeployment('billing');
      // Exists, but the Role does not name it: keyroll's service account gets 403 for it.
      await cluster.createDeployment('reporting');
      controllers = new StandInControllers(cluster, { syncDelayMs: 100, rolloutMs: 100 });
      const ns = cluster.namespace;
      // The standard test policy, billing listing its consumers, and how keyroll reaches the cluster.
      const base = policyYaml({ baseUrl: cli.emulator.url, alertUrl: `${cli.receiver.url}/alerts` });
      const withConsumers = base
        .replace(
          '    maxAge: 7d\n',
          `    maxAge: 7d\n    consumers:\n      - { kind: externalSecret, namespace: ${ns}, name: billing-api-key }\n      - { kind: deployment, namespace: ${ns}, name: billing }\n      - { kind: deployment, namespace: ${ns}, name: reporting }\n`,
        )
        .replace(
          'keys:\n',
          `consumers:\n  kubernetes: { kubeconfig: ${cluster.kubeconfigFile} }\n  syncTimeout: 20s\n  rolloutTimeout: 20s\nkeys:\n`,
        );
      await cli.writeFile('policy.yaml', withConsumers);
    });

    afterEach(async () => {
      await controllers.stop();
    });

    it('after the leak: the ExternalSecret synced and billing restarted for the rotation; reporting unreadable (403), the rotation standing', async () => {
      const rotate = await cli.run([
        'rotate',
        '-p',
        'policy.yaml',
        '--key',
        'key_demo_billing',
        '--reason',
        'leak',
        '--actor',
        'responder',
      ]);

      // The rotation stands; the consumer that could not be refreshed makes it exit 1 (some failed).
      expect(rotate.code).toBe(1);
      expect(rotate.events.filter((event) => event.event === 'key.rolled')).toHaveLength(1);
      expect(rotate.lastLine).toMatch(/consumers refreshed 2, failed 1/);
      const failed = rotate.events.filter((event) => event.event === 'consumer.failed');
      expect(failed.map((event) => [event.name, event.errorCode])).toEqual([
        ['reporting', 'KR_CONSUMER_FORBIDDEN'],
      ]);
      expect(String(failed[0]?.nextAction)).toContain(
        `kubectl rollout restart deployment/reporting -n ${cluster.namespace}`,
      );
      expect(controllers.restartsOf('billing')).toHaveLength(1);
      expect(controllers.restartsOf('reporting')).toHaveLength(0);

      const status = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);

      // A consumer status cannot read is reported on stderr, not as a key whose state is unknown.
      expect(status.code).toBe(0);
      expect(status.stderr).toContain(
        `consumer deployment ${cluster.namespace}/reporting cannot be read (KR_CONSUMER_FORBIDDEN)`,
      );
      const billing = (JSON.parse(status.stdout) as StatusJson).keys.find(
        (key) => key.keyId === 'key_demo_billing',
      );
      const byName = new Map(
        (billing?.consumers ?? []).map((consumer) => [consumer.consumer.split('/').at(-1), consumer]),
      );
      expect(byName.get('billing-api-key')).toMatchObject({
        state: 'current',
        lastRefreshAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/) as unknown,
      });
      expect(byName.get('billing')).toMatchObject({
        state: 'current',
        restartedFor: [billing?.lastRotationId],
      });
      expect(byName.get('reporting')).toMatchObject({
        state: 'unreadable',
        errorCode: 'KR_CONSUMER_FORBIDDEN',
        lastRefreshAt: null,
      });
      // The other keys list no consumers: no consumers field.
      expect(
        (JSON.parse(status.stdout) as StatusJson).keys
          .filter((key) => key.consumers !== undefined)
          .map((key) => key.keyId),
      ).toEqual(['key_demo_billing']);

      const table = await cli.run(['status', '-p', 'policy.yaml', '-o', 'table']);
      expect(table.stdout).toMatch(/KEY\s+CONSUMER\s+STATE\s+LAST REFRESH\s+DETAIL/);
      expect(table.stdout).toMatch(
        new RegExp(`key_demo_billing\\s+deployment ${cluster.namespace}/billing\\s+current`),
      );

      const skipped = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json', '--no-consumers']);
      expect(
        (JSON.parse(skipped.stdout) as StatusJson).keys.every((key) => key.consumers === undefined),
      ).toBe(true);
    });

    it('a restart owed from a run that stopped is made by the next run and is on its summary line, in its JSON and in its exit code', async () => {
      const leak = await cli.run([
        'rotate',
        '-p',
        'policy.yaml',
        '--key',
        'key_demo_billing',
        '--reason',
        'leak',
        '--actor',
        'responder',
      ]);
      const rotationId = String(leak.events.find((event) => event.event === 'key.rolled')?.rotationId);
      expect(controllers.restartsOf('billing')).toHaveLength(1);
      // What a runner that stopped between its syncs and the restart leaves: the entry, no restarted-for.
      const entry = {
        rotationId,
        keyId: 'key_demo_billing',
        urgent: true,
        storedAt: new Date(Date.now() - 60_000).toISOString(),
      };
      await cluster.admin.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
        {
          group: 'apps',
          version: 'v1',
          namespace: cluster.namespace,
          plural: 'deployments',
          name: 'billing',
          body: {
            metadata: {
              annotations: {
                'keyroll.io/restart-owed': JSON.stringify([entry]),
                'keyroll.io/restarted-for': null,
              },
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );

      const next = await cli.run([
        'rotate',
        '-p',
        'policy.yaml',
        '--key',
        'key_demo_search',
        '--reason',
        'manual',
        '--actor',
        'ops',
        '-o',
        'json',
      ]);

      expect(controllers.restartsOf('billing')).toHaveLength(2);
      expect(next.code).toBe(0);
      expect(next.lastLine).toMatch(
        /^rotated 1, failed 0, skipped 0; consumers refreshed 2, failed 0, owed from earlier runs 2$/,
      );
      const json = JSON.parse(
        next.stdout.split('\n').find((line) => line.startsWith('{"runId"')) ?? '{}',
      ) as {
        consumers?: {
          refreshed: number;
          owed: number;
          outcomes: { consumer: { name: string }; result: string }[];
        };
      };
      expect(json.consumers).toMatchObject({ refreshed: 2, owed: 2 });
      expect(json.consumers?.outcomes.map((outcome) => [outcome.consumer.name, outcome.result])).toEqual(
        expect.arrayContaining([['billing', 'refreshed']]),
      );
    }, 120_000);

    it('before any rotation: a consumer never refreshed by keyroll reads as stale, not current', async () => {
      const status = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);

      const billing = (JSON.parse(status.stdout) as StatusJson).keys.find(
        (key) => key.keyId === 'key_demo_billing',
      );
      const es = billing?.consumers?.find((consumer) => consumer.consumer.endsWith('/billing-api-key'));
      expect(es).toMatchObject({ state: 'stale', lastRefreshAt: null });
    });
  });
}
