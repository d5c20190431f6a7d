// The reflector of src/crd/watch/ on the real kube-apiserver, with a test-only Widget CRD: the
// first list (in pages) and the watch see adds, updates and deletes; a watch the server closes
// (timeoutSeconds) or a connection cut in the middle resumes from the last resourceVersion without
// a second list and without missing what changed meanwhile; a resourceVersion the API server no
// longer holds (410 Gone from its watch cache) costs one relist whose differences come out as
// changes, an object deleted meanwhile as `deleted`.
import { afterEach, describe, expect, it } from 'vitest';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { KubeResourceClient } from '../../src/crd/watch/kube-client.ts';
import { Reflector, type WatchChange } from '../../src/crd/watch/reflector.ts';
import { adminKubeConfig, type KubeApiServerInfo } from '../support/kube-apiserver.ts';
import { waitFor } from '../support/wait-for.ts';
import { startRelay, useWidgets, type Relay, type Widgets } from './kube-crd-support.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
/** Short waits between tries, so a cut connection is tried again at once; the policy is the product's. */
const FAST_BACKOFF = { initialMs: 20, maxMs: 200 };

interface Watching {
  reflector: Reflector;
  changes: string[];
  audit: MemoryAuditLog;
  stop: () => Promise<void>;
}

function watch(
  kube: KubeApiServerInfo,
  widgets: Widgets,
  options: { server?: string; pageSize?: number; watchTimeoutSeconds?: number } = {},
): Watching {
  const audit = createMemoryAuditLog();
  const changes: string[] = [];
  const config = adminKubeConfig({ ...kube, server: options.server ?? kube.server });
  const reflector = new Reflector({
    requests: new KubeResourceClient(config),
    resource: widgets.resource,
    audit,
    backoff: FAST_BACKOFF,
    onChange: (change: WatchChange) => changes.push(`${change.type} ${change.key}`),
    ...(options.pageSize === undefined ? {} : { pageSize: options.pageSize }),
    ...(options.watchTimeoutSeconds === undefined
      ? {}
      : { watchTimeoutSeconds: options.watchTimeoutSeconds }),
  });
  const controller = new AbortController();
  const running = reflector.run(controller.signal);
  return {
    reflector,
    changes,
    audit,
    stop: async () => {
      controller.abort();
      await running;
    },
  };
}

const seen = (watching: Watching, change: string): Promise<void> =>
  waitFor(() => watching.changes.includes(change), change);

if (server === undefined) {
  describe.skip('the keyroll.io reflector (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  describe('the keyroll.io reflector (kube-apiserver)', () => {
    it('lists in pages, then watches: every add, update and delete comes out once, in order', async () => {
      const widgets = await useWidgets(kube);
      for (const name of ['a', 'b', 'c', 'd', 'e']) await widgets.create(name, { size: 1 });
      const watching = watch(kube, widgets, { pageSize: 2 });
      cleanups.push(watching.stop);
      await watching.reflector.synced;
      const ns = widgets.namespace;
      expect(watching.changes).toEqual(['a', 'b', 'c', 'd', 'e'].map((name) => `added ${ns}/${name}`));
      expect(watching.audit.eventsNamed('crd.watch.synced')).toMatchObject([{ objects: 5, relist: false }]);

      await widgets.create('f', { size: 1 });
      await widgets.update('a', { size: 2 });
      await widgets.remove('b');
      await seen(watching, `deleted ${ns}/b`);
      expect(watching.changes.slice(5)).toEqual([`added ${ns}/f`, `modified ${ns}/a`, `deleted ${ns}/b`]);
      expect((watching.reflector.get(`${ns}/a`)?.spec as { size: number }).size).toBe(2);
      expect([...watching.reflector.objects().keys()].sort()).toEqual(
        ['a', 'c', 'd', 'e', 'f'].map((name) => `${ns}/${name}`),
      );
      expect(watching.reflector.counts.lists).toBe(1);
    });

    it('a watch the server ends (timeoutSeconds) is opened again from the last resourceVersion, never relisted', async () => {
      const widgets = await useWidgets(kube);
      await widgets.create('a', { size: 1 });
      const watching = watch(kube, widgets, { watchTimeoutSeconds: 1 });
      cleanups.push(watching.stop);
      await watching.reflector.synced;
      await waitFor(() => watching.reflector.counts.watches >= 3, 'two watches ended by the server');
      await widgets.update('a', { size: 2 });
      await waitFor(() => watching.reflector.counts.watches >= 5, 'two more watches ended by the server');
      await widgets.create('b', { size: 1 });
      const ns = widgets.namespace;
      await seen(watching, `added ${ns}/b`);
      expect(watching.changes).toEqual([`added ${ns}/a`, `modified ${ns}/a`, `added ${ns}/b`]);
      expect(watching.reflector.counts.lists).toBe(1);
      expect(watching.audit.eventsNamed('crd.watch.failed')).toEqual([]);
    });

    it('a connection cut mid-watch resumes from the last resourceVersion and sees what changed while cut, without a relist', async () => {
      const widgets = await useWidgets(kube);
      for (const name of ['a', 'b']) await widgets.create(name, { size: 1 });
      const relay: Relay = await startRelay(kube.server);
      cleanups.push(relay.close);
      const watching = watch(kube, widgets, { server: relay.url });
      cleanups.push(watching.stop);
      await watching.reflector.synced;
      const watchesBefore = watching.reflector.counts.watches;

      relay.cut();
      await waitFor(
        () => watching.audit.eventsNamed('crd.watch.failed').length >= 2,
        'the reflector failing to reach the API server',
      );
      await widgets.update('a', { size: 2 });
      await widgets.remove('b');
      await widgets.create('c', { size: 1 });
      relay.restore();

      const ns = widgets.namespace;
      await seen(watching, `added ${ns}/c`);
      expect(watching.changes).toEqual([
        `added ${ns}/a`,
        `added ${ns}/b`,
        `modified ${ns}/a`,
        `deleted ${ns}/b`,
        `added ${ns}/c`,
      ]);
      expect(watching.reflector.counts.lists).toBe(1);
      expect(watching.reflector.counts.watches).toBeGreaterThan(watchesBefore);
      expect(watching.audit.eventsNamed('crd.watch.resync')).toEqual([]);
      expect(watching.audit.eventsNamed('crd.watch.failed')[0]).toMatchObject({
        errorCode: 'KR_CRD_UNREACHABLE',
      });
    });

    it('410 Gone (the API server no longer holds the resourceVersion) costs one relist, and what was deleted meanwhile comes out as deleted', async () => {
      // The watch cache of a resource starts at the revision it was created at: recreating the CRD
      // while the reflector is cut off makes its last resourceVersion older than anything the API
      // server holds, so the resumed watch is answered 410 "too old resource version", as after a
      // disconnection longer than the cache's window or an etcd compaction.
      const widgets = await useWidgets(kube);
      for (const name of ['kept', 'gone']) await widgets.create(name, { size: 1 });
      const relay = await startRelay(kube.server);
      cleanups.push(relay.close);
      const watching = watch(kube, widgets, { server: relay.url });
      cleanups.push(watching.stop);
      await watching.reflector.synced;
      const before = watching.reflector.resourceVersion;

      relay.cut();
      await widgets.uninstall();
      await widgets.install();
      await widgets.create('kept', { size: 2 });
      await widgets.create('new', { size: 1 });
      relay.restore();

      const ns = widgets.namespace;
      await waitFor(() => watching.reflector.counts.lists === 2, 'the relist after 410 Gone');
      expect(watching.changes).toEqual([
        `added ${ns}/gone`,
        `added ${ns}/kept`,
        `modified ${ns}/kept`,
        `added ${ns}/new`,
        `deleted ${ns}/gone`,
      ]);
      expect(watching.audit.eventsNamed('crd.watch.resync')).toMatchObject([{ resourceVersion: before }]);
      expect(watching.audit.eventsNamed('crd.watch.synced')).toMatchObject([
        { objects: 2, relist: false },
        { objects: 2, relist: true, added: 1, modified: 1, deleted: 1 },
      ]);
      expect([...watching.reflector.objects().keys()].sort()).toEqual([`${ns}/kept`, `${ns}/new`]);
    });
  });
}
