// Two keyroll installs in one cluster on the real kube-apiserver (issue 31, docs/crds.md "Two
// keyroll installs"): each serves its own ClusterKeyApi (its settings' keyApi), watches every
// RotatedKey, builds its policy from the objects (objectsToPolicy, as the daemon does) and writes
// statuses through its own StatusReporter. Each key ends Ready=True written by its own install
// only; a key of one install copying the other's path is refused by its own install alone; a key
// naming no ClusterKeyApi is written by neither; and a second round writes nothing: no flipping.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import { StatusReporter } from '../../src/crd/controller/reporter.ts';
import type { PolicyOptions } from '../../src/crd/policy/objects-to-policy.ts';
import { findCondition, type Condition } from '../../src/crd/status/conditions.ts';
import { KubeResourceClient, type ObjectRequests } from '../../src/crd/watch/kube-client.ts';
import { Reflector } from '../../src/crd/watch/reflector.ts';
import type { WatchedObject, WatchedResource } from '../../src/crd/watch/resource.ts';
import { keyWith } from '../crd/controller/fixtures.ts';
import { adminKubeConfig } from '../support/kube-apiserver.ts';
import { adminAgent, installKeyrollCrds } from '../support/keyroll-crds.ts';
import { collection, keyrollView, kubeAs } from './kube-tenancy-support.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const API_VERSION = 'keyroll.io/v1alpha1';

if (server === undefined) {
  describe.skip('two keyroll installs in one cluster (the Kubernetes API server is not available)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const agent = adminAgent(kube);
  const api = kubeAs(kube, agent);
  const client = new KubeResourceClient(adminKubeConfig(kube));
  const signal = AbortSignal.timeout(120_000);
  const suffix = randomBytes(4).toString('hex');
  const namespace = `installs-${suffix}`;
  const acme = `acme-${suffix}`;
  const globex = `globex-${suffix}`;
  const vault = `vault-${suffix}`;
  const resource: WatchedResource = {
    group: 'keyroll.io',
    version: 'v1alpha1',
    plural: 'rotatedkeys',
    namespace,
  };
  const stop = new AbortController();

  const create = async (body: {
    kind: string;
    metadata: { name: string; namespace?: string };
    spec: unknown;
  }) => {
    const answer = await api.call('admin', 'POST', collection(body.kind, body.metadata.namespace), {
      apiVersion: API_VERSION,
      ...body,
    });
    expect(answer.status, answer.body.message).toBe(201);
  };
  const keyApi = (name: string, baseUrl: string) =>
    create({
      kind: 'ClusterKeyApi',
      metadata: { name },
      spec: {
        baseUrl,
        credential: { type: 'bearer', token: 'env:KEYROLL_TEST_UNUSED' },
        conditions: [{ namespaces: [namespace], organizations: ['org_billing'] }],
      },
    });
  const rotatedKey = (name: string, apiRef: string, id: string, path: string) =>
    create({
      kind: 'RotatedKey',
      metadata: { name, namespace },
      spec: {
        id,
        organization: 'org_billing',
        apiRef: { name: apiRef },
        destinations: [
          { storeRef: { kind: 'ClusterKeyStore', name: vault }, path: `teams/${namespace}/${path}` },
        ],
        maxAge: '30d',
      },
    });

  /** One install: its settings' keyApi, its own watch and reporter, and the status PATCHes it sent, by object. */
  async function install(keyApiName: string) {
    const patched: string[] = [];
    const requests: ObjectRequests = {
      get: (ref, s) => client.get(ref, s),
      create: (r, ns, body, s) => client.create(r, ns, body, s),
      patchStatus: (ref, patch, s) => {
        patched.push(ref.name);
        return client.patchStatus(ref, patch, s);
      },
    };
    const audit = createMemoryAuditLog();
    // The reflector tells the reporter of each change, as the daemon's does; made first, it needs a late reference.
    const late: { reporter?: StatusReporter } = {};
    const reflector = new Reflector({
      requests: client,
      resource,
      audit,
      onChange: (change) => late.reporter?.onObjectChange(change),
    });
    const reporter = new StatusReporter({
      requests,
      resource,
      objects: reflector,
      keyPolicy: (keyId) => ({ ...keyWith(), id: keyId }),
      readTrustedState: () =>
        Promise.resolve({ exists: true, lastRotatedAt: '2026-11-01T08:00:00Z', lastRotationId: 'rot_1' }),
      audit,
      now: () => new Date('2026-11-29T10:00:00Z'),
    });
    void reflector.run(stop.signal);
    await reflector.synced;
    const options: Omit<PolicyOptions, 'namespaces'> = {
      keyrollNamespace: `keyroll-${suffix}`,
      api: keyApiName,
    };
    late.reporter = reporter;
    /** What the daemon does on a build: the objects into a policy, the generation to the reporter. */
    const build = async () => {
      const view = await keyrollView(api, { namespaces: [namespace], suffix }, options);
      reporter.onGeneration(view.keys, view.refusals);
      await reporter.idle();
      return view;
    };
    reporter.onLeadership(true);
    return { patched, build, reporter, audit };
  }

  const read = (name: string): Promise<WatchedObject> => client.get({ resource, namespace, name }, signal);
  const ready = async (name: string): Promise<Condition | undefined> =>
    findCondition(
      ((await read(name)).status as { conditions?: Condition[] } | undefined)?.conditions ?? [],
      'Ready',
    );

  describe('two keyroll installs in one cluster (kube-apiserver)', () => {
    beforeAll(async () => {
      await installKeyrollCrds(kube);
      const answer = await api.call('admin', 'POST', '/api/v1/namespaces', { metadata: { name: namespace } });
      expect(answer.status).toBe(201);
      await keyApi(acme, 'https://api.acme.example');
      await keyApi(globex, 'https://api.globex.example');
      await create({
        kind: 'ClusterKeyStore',
        metadata: { name: vault },
        spec: {
          kind: 'vault',
          address: 'https://vault.example.com:8200',
          auth: { method: 'kubernetes', role: 'keyroll' },
          conditions: [{ namespaces: [namespace], pathPrefix: 'teams/{namespace}/' }],
        },
      });
      await rotatedKey('acme-key', acme, 'key_acme', 'acme');
      await rotatedKey('globex-key', globex, 'key_globex', 'globex');
      // The same key id on the other API server: another key, not a copycat.
      await rotatedKey('globex-same-id', globex, 'key_acme', 'globex-same-id');
      // Creation times have whole seconds: the copy of acme-key's path is strictly newer.
      await new Promise((resolve) => setTimeout(resolve, 1_100));
      await rotatedKey('globex-copy', globex, 'key_globex_copy', 'acme');
      await rotatedKey('nowhere', `nowhere-${suffix}`, 'key_nowhere', 'nowhere');
    });
    afterAll(async () => {
      stop.abort();
      for (const name of [acme, globex])
        await api.call('admin', 'DELETE', `${collection('ClusterKeyApi')}/${name}`);
      await api.call('admin', 'DELETE', `${collection('ClusterKeyStore')}/${vault}`);
      await agent.close();
    });

    it("writes each key's status from its own install only, once, and a second round writes nothing", async () => {
      const a = await install(acme);
      const b = await install(globex);
      const [viewA, viewB] = [await a.build(), await b.build()];
      expect(a.patched).toEqual(['acme-key']);
      expect(b.patched.sort()).toEqual(['globex-copy', 'globex-key', 'globex-same-id']);
      expect(await ready('acme-key')).toMatchObject({ status: 'True', reason: 'Rotated' });
      expect(await ready('globex-key')).toMatchObject({ status: 'True', reason: 'Rotated' });
      expect(await ready('globex-same-id')).toMatchObject({ status: 'True', reason: 'Rotated' });
      expect(await ready('globex-copy')).toMatchObject({ status: 'False', reason: 'PathInUse' });
      // A key naming no ClusterKeyApi is no install's (neither names it): no status, READY empty.
      expect((await read('nowhere')).status).toBeUndefined();
      // What each built: the other install's keys are neither keys nor refusals.
      expect([...viewA.keys]).toEqual([[`${namespace}/acme-key`, 'key_acme']]);
      expect(viewA.refusals).toEqual([]);
      expect([...viewB.keys].sort()).toEqual([
        [`${namespace}/globex-key`, 'key_globex'],
        [`${namespace}/globex-same-id`, 'key_acme'],
      ]);
      expect(viewB.refusals.map((refusal) => [refusal.object.name, refusal.reason])).toEqual([
        ['globex-copy', 'PathInUse'],
      ]);

      // Nothing audited of the other install's keys.
      expect(a.audit.eventsNamed('crd.status.failed')).toEqual([]);
      expect(b.audit.eventsNamed('crd.status.failed')).toEqual([]);

      // Both build again (a resync, a new leader): the statuses stand, nothing is sent.
      const [sentA, sentB] = [a.patched.length, b.patched.length];
      await a.build();
      await b.build();
      a.reporter.onLeadership(true);
      b.reporter.onLeadership(true);
      await a.reporter.idle();
      await b.reporter.idle();
      expect(a.patched).toHaveLength(sentA);
      expect(b.patched).toHaveLength(sentB);
      expect(await ready('acme-key')).toMatchObject({ status: 'True' });
    });
  });
}
