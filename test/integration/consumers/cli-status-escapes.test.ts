// `keyroll status` on a real Kubernetes API server, with cluster text that carries escape
// sequences (issue 27, finding 4): anyone who may edit a workload's pod template writes
// `kubectl.kubernetes.io/restartedAt`, and external-secrets copies a provider's error into the
// ExternalSecret's Ready message. Printed raw, cursor-up and erase-line rewrote the consumer's
// row so it read `current`; status must show them as visible escapes, in the table and the JSON.
import { AppsV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { policyYaml, useCliFixture } from '../../cli/harness.ts';
import { kubeApiServer } from '../servers.ts';
import { consumerNamespace } from '../../support/consumer-cluster.ts';
import { rawControls } from '../../support/raw-controls.ts';

const ESC = '\u001b';
/** Anything a terminal would act on rather than print. */

const server = await kubeApiServer();

if (server === undefined) {
  describe.skip('keyroll status of hostile cluster text on a real Kubernetes API server (not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const cli = useCliFixture();

  describe('keyroll status shows cluster text with its escape sequences escaped', () => {
    it('a restartedAt annotation and a Ready message that would rewrite the row print as escapes', async () => {
      const cluster = await consumerNamespace(kube, cli.dir, (namespace) => [
        { namespace, externalSecrets: ['billing-api-key'], deployments: ['billing'] },
      ]);
      const ns = cluster.namespace;
      await cluster.createExternalSecret('billing-api-key');
      await cluster.createDeployment('billing');
      // Back to the row's start, up one line, erase it, and a clean row claiming `current`.
      const forgedRow = `key_demo_billing  deployment ${ns}/billing  current`;
      const restartedAt = `2026-01-05T03:00:00Z\r${ESC}[1A${ESC}[2K${forgedRow}`;
      await cluster.admin.makeApiClient(AppsV1Api).patchNamespacedDeployment(
        {
          namespace: ns,
          name: 'billing',
          body: {
            spec: {
              template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': restartedAt } } },
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      // A provider error as external-secrets copies it: a one-character CSI (U+009B), an OSC title, a bidi override.
      const message = `could not get secret: \u009b1A${ESC}]0;pwned\u0007 \u202eeurT ydaeR`;
      await cluster.admin.makeApiClient(CustomObjectsApi).patchNamespacedCustomObjectStatus(
        {
          group: 'external-secrets.io',
          version: 'v1',
          plural: 'externalsecrets',
          namespace: ns,
          name: 'billing-api-key',
          body: {
            status: {
              conditions: [
                {
                  type: 'Ready',
                  status: 'False',
                  reason: 'SecretSyncedError',
                  message,
                  lastTransitionTime: '2026-01-05T03:00:00Z',
                },
              ],
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const base = policyYaml({ baseUrl: cli.emulator.url, alertUrl: `${cli.receiver.url}/alerts` });
      await cli.writeFile(
        'policy.yaml',
        base
          .replace(
            '    maxAge: 7d\n',
            `    maxAge: 7d\n    consumers:\n      - { kind: externalSecret, namespace: ${ns}, name: billing-api-key }\n      - { kind: deployment, namespace: ${ns}, name: billing }\n`,
          )
          .replace('keys:\n', `consumers:\n  kubernetes: { kubeconfig: ${cluster.kubeconfigFile} }\nkeys:\n`),
      );

      const table = await cli.run(['status', '-p', 'policy.yaml', '-o', 'table']);

      expect(table.code).toBe(0);
      expect(rawControls(table.stdout)).toEqual([]);
      const consumerRows = table.stdout
        .split('\n')
        .filter((line) => line.startsWith('key_demo_billing  ') && line.includes(`${ns}/`));
      // One row per consumer, neither claiming `current`: the forged row is text inside the cell.
      expect(consumerRows).toHaveLength(2);
      expect(consumerRows.find((row) => row.includes(`deployment ${ns}/billing`))).toMatch(
        /^key_demo_billing\s+deployment \S+\s+(?!current)\S+\s+2026-01-05T03:00:00Z\\r\\u001b\[1A\\u001b\[2Kkey_demo_billing {2}deployment/,
      );
      expect(consumerRows.find((row) => row.includes('billing-api-key'))).toContain(
        'Ready False: could not get secret: \\u009b1A\\u001b]0;pwned\\u0007 \\u202eeurT ydaeR',
      );
      expect(rawControls(table.stderr)).toEqual([]);

      const json = await cli.run(['status', '-p', 'policy.yaml', '-o', 'json']);
      expect(rawControls(json.stdout)).toEqual([]);
      const billing = (
        JSON.parse(json.stdout) as {
          keys: {
            keyId: string;
            consumers?: { consumer: string; lastRefreshAt: string | null; detail: string }[];
          }[];
        }
      ).keys.find((key) => key.keyId === 'key_demo_billing');
      // The JSON keeps the cluster's text exactly: escaped on the wire, the same string once parsed.
      expect(
        billing?.consumers?.find((consumer) => consumer.consumer.endsWith('/billing'))?.lastRefreshAt,
      ).toBe(restartedAt);
      expect(
        billing?.consumers?.find((consumer) => consumer.consumer.endsWith('/billing-api-key'))?.detail,
      ).toContain(message);
    });
  });
}
