// The daemon's keys from keyroll.io objects against a stand-in of the API server's list and watch
// (the real one is in test/integration/kube-crd-daemon.test.ts): what the real server does not let
// a test time — which changes build the policy again (a status write or an annotation keeps the
// generation and builds nothing), the debounce (one build per burst, never postponed past its
// cap), and a refusal audited once however often the objects are built.
import { KubeConfig } from '@kubernetes/client-node';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import { KeyrollObject } from '../../src/crd/kinds/kinds.ts';
import type { ListPage, WatchEvent, WatchFrom, WatchRequests } from '../../src/crd/watch/kube-client.ts';
import type { WatchedObject, WatchedResource } from '../../src/crd/watch/resource.ts';
import { OBJECT_CHANGE_DEBOUNCE, ObjectKeys } from '../../src/daemon/object-keys.ts';
import { createTempDir } from '../support/temp-dir.ts';

/** Lists what `objects` holds per plural; each watch hands out what the test pushes. */
class StandInServer implements WatchRequests {
  readonly objects = new Map<string, WatchedObject[]>();
  readonly #waiting = new Map<string, ((event: WatchEvent) => void)[]>();
  readonly #queued = new Map<string, WatchEvent[]>();

  list(resource: WatchedResource): Promise<ListPage> {
    return Promise.resolve({ items: this.objects.get(resource.plural) ?? [], resourceVersion: '1' });
  }

  async *watch(resource: WatchedResource, _from: WatchFrom, signal: AbortSignal): AsyncIterable<WatchEvent> {
    while (!signal.aborted) {
      const queued = this.#queued.get(resource.plural)?.shift();
      if (queued !== undefined) {
        yield queued;
        continue;
      }
      const next = await new Promise<WatchEvent | undefined>((resolve) => {
        signal.addEventListener('abort', () => {
          resolve(undefined);
        });
        const waiting = this.#waiting.get(resource.plural) ?? [];
        waiting.push(resolve);
        this.#waiting.set(resource.plural, waiting);
      });
      if (next === undefined) return;
      yield next;
    }
  }

  push(plural: string, event: WatchEvent): void {
    const waiter = this.#waiting.get(plural)?.shift();
    if (waiter !== undefined) waiter(event);
    else this.#queued.set(plural, [...(this.#queued.get(plural) ?? []), event]);
  }
}

const API_VERSION = 'keyroll.io/v1alpha1';
const api: WatchedObject = {
  apiVersion: API_VERSION,
  kind: 'ClusterKeyApi',
  metadata: { name: 'acme', resourceVersion: '1', generation: 1 },
  spec: {
    baseUrl: 'https://api.example.com',
    credential: { type: 'bearer', token: 'env:ACME_TOKEN' },
    conditions: [{ namespaces: ['billing'], organizations: ['org_billing'] }],
  },
};
const vault: WatchedObject = {
  apiVersion: API_VERSION,
  kind: 'ClusterKeyStore',
  metadata: { name: 'vault', resourceVersion: '1', generation: 1 },
  spec: {
    kind: 'vault',
    address: 'https://vault.example.com:8200',
    auth: { method: 'kubernetes', role: 'keyroll' },
    conditions: [{ namespaces: ['billing'] }],
  },
};
function rotatedKey(name: string, generation: number, spec: Record<string, unknown> = {}): WatchedObject {
  return {
    apiVersion: API_VERSION,
    kind: 'RotatedKey',
    metadata: { namespace: 'billing', name, resourceVersion: String(10 + generation), generation },
    spec: {
      id: `key_${name}`,
      organization: 'org_billing',
      apiRef: { name: 'acme' },
      destinations: [{ storeRef: { kind: 'ClusterKeyStore', name: 'vault' }, path: `billing/${name}` }],
      maxAge: '30d',
      ...spec,
    },
  };
}

const stops: (() => Promise<void>)[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const stop of stops.splice(0)) await stop();
});

async function started(server: StandInServer) {
  const temp = await createTempDir('keyroll-object-keys-');
  stops.push(() => temp.remove());
  const settings = join(temp.path, 'settings.yaml');
  await writeFile(settings, 'version: 1\nkeyApi: acme\n');
  const audit = createMemoryAuditLog();
  const controller = new AbortController();
  const generations: string[][] = [];
  const keys = await ObjectKeys.start(
    {
      kubeConfig: new KubeConfig(),
      namespace: 'keyroll',
      requests: server,
      observer: {
        onGeneration: (held) => generations.push([...held.values()]),
        onKeyOutcome: () => undefined,
        onLeadership: () => undefined,
      },
    },
    audit,
    settings,
    controller.signal,
  );
  stops.push(() => keys.stop());
  keys.inForce(await keys.load());
  let builds = 0;
  keys.listen(() => {
    builds += 1;
  });
  return { keys, audit, generations, builds: () => builds };
}

function serverWith(...keys: WatchedObject[]): StandInServer {
  const server = new StandInServer();
  server.objects.set('clusterkeyapis', [api]);
  server.objects.set('clusterkeystores', [vault]);
  server.objects.set('rotatedkeys', keys);
  server.objects.set('namespaces', [{ metadata: { name: 'billing', resourceVersion: '1' } }]);
  return server;
}

describe('ObjectKeys', () => {
  it('builds the policy from the objects listed, and tells the observer which object is which key', async () => {
    const { keys, generations } = await started(serverWith(rotatedKey('billing', 1)));
    expect(generations).toEqual([['key_billing']]);
    expect(keys.rebuild()).toBeUndefined();
  });

  it('a status write or an annotation (same generation) builds nothing; a new spec does, once per burst', async () => {
    const server = serverWith(rotatedKey('billing', 1));
    const run = await started(server);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const statusWritten = { ...rotatedKey('billing', 1), status: { lastRotated: '2030-01-01T00:00:00Z' } };
    server.push('rotatedkeys', {
      type: 'MODIFIED',
      object: { ...statusWritten, metadata: { ...statusWritten.metadata, resourceVersion: '50' } },
    });
    await vi.advanceTimersByTimeAsync(OBJECT_CHANGE_DEBOUNCE.maxDelayMs * 2);
    expect(run.builds()).toBe(0);

    for (const generation of [2, 3, 4]) {
      server.push('rotatedkeys', { type: 'MODIFIED', object: rotatedKey('billing', generation) });
      await vi.advanceTimersByTimeAsync(OBJECT_CHANGE_DEBOUNCE.quietMs / 2);
    }
    expect(run.builds()).toBe(0);
    await vi.advanceTimersByTimeAsync(OBJECT_CHANGE_DEBOUNCE.quietMs);
    expect(run.builds()).toBe(1);
  });

  it('a burst that never goes quiet is built at the cap, not postponed', async () => {
    const server = serverWith(rotatedKey('billing', 1));
    const run = await started(server);
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const step = OBJECT_CHANGE_DEBOUNCE.quietMs / 2;
    for (let at = 0, generation = 2; at < OBJECT_CHANGE_DEBOUNCE.maxDelayMs; at += step, generation++) {
      server.push('rotatedkeys', { type: 'MODIFIED', object: rotatedKey('billing', generation) });
      await vi.advanceTimersByTimeAsync(step);
    }
    expect(run.builds()).toBe(1);
  });

  it('a build after one change parses only the object that changed', async () => {
    const server = serverWith(rotatedKey('a', 1), rotatedKey('b', 1), rotatedKey('c', 1));
    const run = await started(server);
    const parse = vi.spyOn(KeyrollObject, 'safeParse');
    expect(run.keys.rebuild()).toBeUndefined();
    expect(parse).not.toHaveBeenCalled();
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    server.push('rotatedkeys', { type: 'MODIFIED', object: rotatedKey('b', 2, { maxAge: '20d' }) });
    await vi.advanceTimersByTimeAsync(OBJECT_CHANGE_DEBOUNCE.quietMs);
    expect(run.builds()).toBe(1);
    expect(run.keys.rebuild()?.keys.find((key) => key.id === 'key_b')?.maxAgeMs).toBe(20 * 24 * 3600_000);
    expect(parse.mock.calls.map(([raw]) => (raw as WatchedObject).metadata?.name)).toEqual(['b']);
    parse.mockRestore();
  });

  it('a refusal is audited once, however often the objects are built, and again for a new version of the object', async () => {
    const foreign = rotatedKey('foreign', 1, { organization: 'org_other' });
    const server = serverWith(rotatedKey('billing', 1), foreign);
    const run = await started(server);
    expect(run.audit.eventsNamed('crd.key_refused')).toEqual([
      expect.objectContaining({ object: 'billing/foreign', reason: 'OrganizationNotAdmitted' }),
    ]);
    expect(run.keys.rebuild()).toBeUndefined();
    expect(run.keys.rebuild()).toBeUndefined();
    expect(run.audit.eventsNamed('crd.key_refused')).toHaveLength(1);

    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    server.push('rotatedkeys', {
      type: 'MODIFIED',
      object: rotatedKey('foreign', 2, { organization: 'org_other', maxAge: '20d' }),
    });
    await vi.advanceTimersByTimeAsync(OBJECT_CHANGE_DEBOUNCE.quietMs);
    expect(run.builds()).toBe(1);
    expect(run.keys.rebuild()).toBeUndefined();
    expect(run.audit.eventsNamed('crd.key_refused')).toHaveLength(2);
  });
});
