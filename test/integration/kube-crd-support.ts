// What the keyroll.io watch and status tests share: a test-only CRD of their own (a namespaced
// `Widget` with a status subresource, in a group made for one test, so tests of several files never
// see each other's objects and one test may delete and recreate its CRD), and a TCP relay to the API
// server that a test can cut and restore (the API server unreachable, for real, while its objects
// change).
import { randomBytes } from 'node:crypto';
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import {
  ApiException,
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  type V1CustomResourceDefinition,
} from '@kubernetes/client-node';
import { clientNodeRequest } from '../../src/http/client-node-request.ts';
import type { WatchedResource } from '../../src/crd/watch/resource.ts';
import {
  adminKubeConfig,
  installCustomResourceDefinition,
  type KubeApiServerInfo,
} from '../support/kube-apiserver.ts';
import { waitFor } from '../support/wait-for.ts';

export interface Widgets {
  resource: WatchedResource & { namespace: string };
  group: string;
  namespace: string;
  definition: V1CustomResourceDefinition;
  /** Creates a widget with `spec` and returns its resourceVersion. */
  create(name: string, spec: Record<string, unknown>): Promise<string>;
  /** Replaces the widget's spec (a merge patch, as `kubectl patch --type merge` sends). */
  update(name: string, spec: Record<string, unknown>): Promise<string>;
  remove(name: string): Promise<void>;
  /** Deletes the CRD (the API server deletes every widget with it) and waits until it is gone. */
  uninstall(): Promise<void>;
  install(): Promise<void>;
}

export function widgetDefinition(group: string): V1CustomResourceDefinition {
  // client-node's serializer knows the field by its TypeScript name only (the wire name is dropped).
  const open = { type: 'object', x_kubernetes_preserve_unknown_fields: true };
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `widgets.${group}` },
    spec: {
      group,
      scope: 'Namespaced',
      names: { plural: 'widgets', singular: 'widget', kind: 'Widget', listKind: 'WidgetList' },
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          subresources: { status: {} },
          schema: { openAPIV3Schema: { type: 'object', properties: { spec: open, status: open } } },
        },
      ],
    },
  };
}

/** A Widget CRD in a group of its own and a namespace of its own, installed and established. */
export async function useWidgets(kube: KubeApiServerInfo): Promise<Widgets> {
  const id = randomBytes(4).toString('hex');
  const group = `t${id}.test.keyroll.io`;
  const namespace = `crd-watch-${id}`;
  const admin = adminKubeConfig(kube);
  const objects = admin.makeApiClient(CustomObjectsApi);
  const extensions = admin.makeApiClient(ApiextensionsV1Api);
  await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
  const definition = widgetDefinition(group);
  const coordinates = { group, version: 'v1', namespace, plural: 'widgets' };
  const versionOf = (object: unknown): string =>
    (object as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion ?? '';
  const install = (): Promise<void> => installCustomResourceDefinition(kube, definition);
  await install();
  return {
    resource: { group, version: 'v1', plural: 'widgets', namespace },
    group,
    namespace,
    definition,
    install,
    create: async (name, spec) =>
      versionOf(
        await objects.createNamespacedCustomObject({
          ...coordinates,
          body: { apiVersion: `${group}/v1`, kind: 'Widget', metadata: { name }, spec },
        }),
      ),
    update: async (name, spec) =>
      versionOf(
        await objects.patchNamespacedCustomObject(
          { ...coordinates, name, body: { spec } },
          clientNodeRequest(AbortSignal.timeout(10_000), PatchStrategy.MergePatch),
        ),
      ),
    remove: async (name) => {
      await objects.deleteNamespacedCustomObject({ ...coordinates, name });
    },
    uninstall: async () => {
      const name = definition.metadata?.name ?? '';
      await extensions.deleteCustomResourceDefinition({ name });
      await waitFor(async () => {
        try {
          await extensions.readCustomResourceDefinition({ name });
          return false;
        } catch (error) {
          if (error instanceof ApiException && error.code === 404) return true;
          throw error;
        }
      }, `the CRD ${name} deleted`);
    },
  };
}

export interface Relay {
  /** The relay's URL: a client config pointed here reaches the API server through it. */
  url: string;
  /** Drops every open connection and refuses new ones until restore(). */
  cut: () => void;
  restore: () => void;
  close: () => Promise<void>;
}

/** A TCP relay to the API server that the test can cut (connections reset) and restore. */
export async function startRelay(target: string): Promise<Relay> {
  const { hostname, port } = new URL(target);
  const sockets = new Set<Socket>();
  let open = true;
  const relay: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
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
    cut: () => {
      open = false;
      for (const socket of sockets) socket.destroy();
    },
    restore: () => {
      open = true;
    },
    close: async () => {
      open = false;
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) =>
        relay.close(() => {
          resolve();
        }),
      );
    },
  };
}
