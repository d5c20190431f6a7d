// `keyroll daemon --keys-from kubernetes` on the real kube-apiserver with the keyroll.io CRDs
// applied (issue 31 §5): the daemon builds its policy from the objects it watches and swaps it in
// through its reload path. A RotatedKey created while it runs is rotated (the emulator rolls it,
// the file store holds the live value); an update is a new generation in force; a delete stops
// the rotations, is audited, and leaves the stored secret as it is; a refused object is audited
// once with its reason and handed to the observer; a hostile copy of a key's id is refused and
// the key it copied stays in force. The daemon acts as keyroll's service account bound to the
// ClusterRole the chart renders for daemon.keysFrom kubernetes (helm template, applied as is, named
// per test): a permission the chart forgot would leave the watch forbidden and the daemon never
// started. Every test has its own namespaces, ClusterKeyApi and ClusterKeyStore (the API server
// is shared by every test file: other files' objects are there too).
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  CoreV1Api,
  RbacAuthorizationV1Api,
  type V1ClusterRole,
  type V1ClusterRoleBinding,
} from '@kubernetes/client-node';
import { request, type Agent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { staticCredential } from '../../src/api/credentials.ts';
import type { AuditEventName } from '../../src/audit/events.ts';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import type { Refusal } from '../../src/crd/policy/refusal.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import type { ObjectsObserver } from '../../src/daemon/objects-observer.ts';
import { startEmulator, type RunningEmulator } from '../../src/emulator/server.ts';
import { RecordingAlerter } from '../rotation/harness.ts';
import { adminAgent, installKeyrollCrds } from '../support/keyroll-crds.ts';
import { renderConsumerTemplates } from '../support/consumer-cluster.ts';
import {
  adminKubeConfig,
  serviceAccountCredentials,
  type KubeApiServerInfo,
} from '../support/kube-apiserver.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { createTempDir } from '../support/temp-dir.ts';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const BASE = '/apis/keyroll.io/v1alpha1';
const ORG = 'org_demo_acme';
const OWNER_TOKEN = 'demo-owner-token';
const BILLING = 'key_demo_billing';
const SEARCH = 'key_demo_search';

/** The parts of a RotatedKey the status tests read. */
interface KeyObject {
  metadata: { annotations?: Record<string, string> };
  status?: {
    lastRotated?: string;
    lastRotationId?: string;
    conditions?: { type: string; status: string; reason: string }[];
    rotateNow?: { value: string; outcome?: string; requestedBy?: string };
  };
}

/** What the observer was told, in order. */
interface Told {
  generations: { keys: Record<string, string>; refusals: Refusal[] }[];
  outcomes: { keyId: string; result: string }[];
  leading: boolean[];
}

interface ObjectsDaemon {
  daemon: Daemon;
  namespace: string;
  audit: MemoryAuditLog;
  emulator: RunningEmulator;
  told: Told;
  secretsDir: string;
  /** The daemon's --policy: the settings every key shares. */
  settingsFile: string;
  createKey(name: string, spec: Record<string, unknown>): Promise<void>;
  patchKey(name: string, patch: Record<string, unknown>): Promise<void>;
  deleteKey(name: string): Promise<void>;
  /** The RotatedKey as the API server holds it (admin). */
  readKey(name: string): Promise<KeyObject>;
  /** The spec of a key stored by the ClusterKeyStore under this test's namespace. */
  keySpec(id: string, path: string, extra?: Record<string, unknown>): Record<string, unknown>;
}

async function call(
  kube: KubeApiServerInfo,
  agent: Agent,
  method: 'POST' | 'PATCH' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<void> {
  const response = await request(`${kube.server}${path}`, {
    method,
    dispatcher: agent,
    headers: {
      'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json',
      accept: 'application/json',
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.body.text();
  if (response.statusCode >= 300)
    throw new Error(`${method} ${path} answered ${String(response.statusCode)}: ${text}`);
}

/** keyroll's service account in `releaseNamespace`, bound to the chart's ClusterRole of objects mode. */
async function keyrollAccount(kube: KubeApiServerInfo, releaseNamespace: string, suffix: string) {
  const { kubeConfig } = await serviceAccountCredentials(kube, releaseNamespace, 'keyroll');
  const rendered = await renderConsumerTemplates(releaseNamespace, [], ['templates/objects-rbac.yaml'], {
    set: ['daemon.enabled=true', 'daemon.keysFrom=kubernetes', 'cronjob.enabled=false'],
  });
  const rbac = adminKubeConfig(kube).makeApiClient(RbacAuthorizationV1Api);
  const names: string[] = [];
  for (const object of rendered) {
    // Cluster-scoped: one name per test; the rules, subjects and roleRef as rendered.
    const copy = structuredClone(object) as V1ClusterRole & Partial<V1ClusterRoleBinding>;
    const name = `${copy.metadata?.name ?? ''}-${suffix}`;
    names.push(name);
    (copy.metadata ??= {}).name = name;
    if (copy.roleRef !== undefined) {
      copy.roleRef.name = `${copy.roleRef.name}-${suffix}`;
      await rbac.createClusterRoleBinding({ body: copy as V1ClusterRoleBinding });
    } else await rbac.createClusterRole({ body: copy });
  }
  expect(rendered.map((object) => object.kind)).toEqual(['ClusterRole', 'ClusterRoleBinding']);
  return {
    kubeConfig,
    remove: async () => {
      await rbac.deleteClusterRoleBinding({ name: names[1] ?? '' });
      await rbac.deleteClusterRole({ name: names[0] ?? '' });
    },
  };
}

if (server === undefined) {
  describe.skip('the daemon with keys from keyroll.io objects (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  await installKeyrollCrds(kube);
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** A namespace, a ClusterKeyApi (the emulator) and a file ClusterKeyStore of its own, and a daemon watching every object. */
  async function startObjectsDaemon(options: { statusWriter?: boolean } = {}): Promise<ObjectsDaemon> {
    const suffix = randomBytes(4).toString('hex');
    const namespace = `keys-${suffix}`;
    const agent = adminAgent(kube);
    cleanups.push(() => agent.close());
    const emulator = await startEmulator({ port: 0 });
    cleanups.push(() => emulator.close());
    const temp = await createTempDir('keyroll-objects-');
    cleanups.push(() => temp.remove());
    const secretsDir = join(temp.path, 'secrets');
    await adminKubeConfig(kube)
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: namespace } } });
    const api = `api-${suffix}`;
    const store = `files-${suffix}`;
    await call(kube, agent, 'POST', `${BASE}/clusterkeyapis`, {
      apiVersion: 'keyroll.io/v1alpha1',
      kind: 'ClusterKeyApi',
      metadata: { name: api },
      spec: {
        baseUrl: emulator.url,
        credential: { type: 'bearer', token: 'env:KEYROLL_TEST_UNUSED' },
        rateLimitPerMinute: 6000,
        conditions: [{ namespaces: [namespace], organizations: [ORG] }],
      },
    });
    cleanups.push(() => call(kube, agent, 'DELETE', `${BASE}/clusterkeyapis/${api}`));
    await call(kube, agent, 'POST', `${BASE}/clusterkeystores`, {
      apiVersion: 'keyroll.io/v1alpha1',
      kind: 'ClusterKeyStore',
      metadata: { name: store },
      spec: { kind: 'file', directory: secretsDir, conditions: [{ namespaces: [namespace] }] },
    });
    cleanups.push(() => call(kube, agent, 'DELETE', `${BASE}/clusterkeystores/${store}`));
    const account = await keyrollAccount(kube, `keyroll-${suffix}`, suffix);
    cleanups.push(account.remove);
    const settingsFile = join(temp.path, 'settings.yaml');
    await writeFile(settingsFile, `version: 1\nkeyApi: ${api}\n`);

    const audit = createMemoryAuditLog();
    const alerter = new RecordingAlerter();
    const told: Told = { generations: [], outcomes: [], leading: [] };
    const observer: ObjectsObserver = {
      onGeneration: (keys, refusals) => {
        told.generations.push({ keys: Object.fromEntries(keys), refusals: [...refusals] });
      },
      onKeyOutcome: (keyId, outcome) => {
        told.outcomes.push({ keyId, result: outcome.result });
      },
      onLeadership: (leading) => {
        told.leading.push(leading);
      },
    };
    const daemon = await Daemon.start({
      policyFile: settingsFile,
      keysFrom: {
        kubeConfig: account.kubeConfig,
        namespace: `keyroll-${suffix}`,
        // Without an observer the daemon writes the objects' status itself (daemon/object-status.ts).
        ...(options.statusWriter === true ? {} : { observer }),
        // Short, so a test waits for the build and not for the product's second of quiet.
        debounce: { quietMs: 20, maxDelayMs: 100 },
        watchBackoff: { initialMs: 20, maxMs: 200 },
      },
      listen: { host: '127.0.0.1', port: 0 },
      audit,
      checkIntervalMs: 24 * 3600_000,
      concurrency: 1,
      runtime: {
        credentials: staticCredential(new Secret(OWNER_TOKEN), 'test owner token'),
        sleep: () => Promise.resolve(),
        alerter,
      },
    });
    cleanups.push(async () => {
      await daemon.shutdown();
      // Invariant 3: no minted secret, nor keyroll's token, in any audit line or alert.
      expectNoSecrets(
        [...audit.lines, ...alerter.alerts.map((a) => JSON.stringify(a))],
        [...emulator.state.mintedSecrets(), OWNER_TOKEN],
      );
    });
    const keys = `${BASE}/namespaces/${namespace}/rotatedkeys`;
    return {
      daemon,
      namespace,
      audit,
      emulator,
      told,
      secretsDir,
      settingsFile,
      createKey: (name, spec) =>
        call(kube, agent, 'POST', keys, {
          apiVersion: 'keyroll.io/v1alpha1',
          kind: 'RotatedKey',
          metadata: { name, namespace },
          spec,
        }),
      patchKey: (name, patch) => call(kube, agent, 'PATCH', `${keys}/${name}`, patch),
      deleteKey: (name) => call(kube, agent, 'DELETE', `${keys}/${name}`),
      readKey: async (name) => {
        const response = await request(`${kube.server}${keys}/${name}`, { dispatcher: agent });
        return (await response.body.json()) as KeyObject;
      },
      keySpec: (id, path, extra = {}) => ({
        id,
        organization: ORG,
        apiRef: { name: api },
        destinations: [{ storeRef: { kind: 'ClusterKeyStore', name: store }, path: `${namespace}/${path}` }],
        maxAge: '30d',
        ...extra,
      }),
    };
  }

  const storedValue = async (objects: ObjectsDaemon, path: string): Promise<string> =>
    readFile(join(objects.secretsDir, objects.namespace, path), 'utf8');
  const apiKeyOf = (text: string): string => (JSON.parse(text) as { apiKey: string }).apiKey;
  const mine = (objects: ObjectsDaemon, event: AuditEventName) =>
    objects.audit
      .eventsNamed(event)
      .filter((record) => String(record['object']).startsWith(`${objects.namespace}/`));

  describe('the daemon with keys from keyroll.io objects (kube-apiserver)', () => {
    it('rotates a RotatedKey created while it runs, takes an update as a new generation, and on delete stops and leaves the secret as stored', async () => {
      const objects = await startObjectsDaemon();
      const { daemon, namespace, emulator, told } = objects;
      expect(objects.audit.eventsNamed('daemon.started')).toEqual([
        expect.objectContaining({ keysFrom: 'kubernetes' }),
      ]);
      expect(told.leading).toEqual([true]);

      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));
      await waitFor(() => emulator.state.rollCount(BILLING) === 1, 'the new RotatedKey rotated');
      await daemon.idle();
      const stored = await storedValue(objects, 'billing.json');
      expect(emulator.state.isLiveSecret(BILLING, apiKeyOf(stored))).toBe(true);
      expect(told.generations.at(-1)?.keys).toEqual({ [`${namespace}/billing`]: BILLING });
      expect(told.outcomes).toContainEqual({ keyId: BILLING, result: 'rotated' });

      // A new spec (maxAge 30d → 20d) is a new generation, swapped in through the reload path.
      await objects.patchKey('billing', { spec: { maxAge: '20d' } });
      await waitFor(
        () => daemon.policy().keys[0]?.maxAgeMs === 20 * 24 * 3600_000,
        'the updated RotatedKey in force',
      );
      expect(emulator.state.rollCount(BILLING)).toBe(1);

      await objects.deleteKey('billing');
      await waitFor(() => daemon.policy().keys.length === 0, 'the deleted RotatedKey out of the policy');
      expect(objects.audit.eventsNamed('crd.key_deleted')).toEqual([
        expect.objectContaining({ object: `${namespace}/billing`, keyId: BILLING }),
      ]);
      expect(told.generations.at(-1)?.keys).toEqual({});
      await daemon.sweep();
      await daemon.idle();
      expect(emulator.state.rollCount(BILLING)).toBe(1);
      expect(await storedValue(objects, 'billing.json')).toBe(stored);
    });

    it('without an observer writes the RotatedKey status after its rotation and serves a rotate-now annotation once', async () => {
      const objects = await startObjectsDaemon({ statusWriter: true });
      const { daemon, emulator } = objects;
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));
      await waitFor(() => emulator.state.rollCount(BILLING) === 1, 'the new RotatedKey rotated');
      await daemon.idle();
      const ready = (key: KeyObject) => key.status?.conditions?.find((c) => c.type === 'Ready');
      let key = await objects.readKey('billing');
      await waitFor(async () => {
        key = await objects.readKey('billing');
        return ready(key)?.status === 'True' && key.status?.lastRotated !== undefined;
      }, 'Ready=True with the last rotation in the status');
      const firstRotation = key.status?.lastRotationId;
      expect(firstRotation).toEqual(expect.any(String));

      // keyroll.io/rotate-now: rotated once more through the launcher (compromise, like leak,
      // bypasses the minInterval the first rotation just started), settled, the annotation removed.
      await objects.patchKey('billing', {
        metadata: { annotations: { 'keyroll.io/rotate-now': 'compromise: test' } },
      });
      await waitFor(() => emulator.state.rollCount(BILLING) === 2, 'the rotate-now rotated');
      await waitFor(async () => {
        key = await objects.readKey('billing');
        return (
          key.metadata.annotations?.['keyroll.io/rotate-now'] === undefined &&
          key.status?.rotateNow?.value === 'compromise: test' &&
          key.status.lastRotationId !== firstRotation
        );
      }, 'the rotate-now settled in the status and the annotation removed');
      expect(key.status?.rotateNow).toMatchObject({ outcome: 'Rotated' });
      expect(ready(key)?.status).toBe('True');
      await daemon.sweep();
      await daemon.idle();
      expect(emulator.state.rollCount(BILLING)).toBe(2);
      const stored = await storedValue(objects, 'billing.json');
      expect(emulator.state.isLiveSecret(BILLING, apiKeyOf(stored))).toBe(true);
      expect(objects.audit.eventsNamed('crd.status.failed')).toEqual([]);
    });

    it('audits a refused RotatedKey once with its reason, hands it to the observer, and rotates the good key beside it', async () => {
      const objects = await startObjectsDaemon();
      const { daemon, namespace, emulator, told } = objects;
      await objects.createKey('search', objects.keySpec(SEARCH, 'search.json'));
      // An organization the ClusterKeyApi does not admit for this namespace.
      await objects.createKey(
        'foreign',
        objects.keySpec(BILLING, 'foreign.json', { organization: 'org_demo_starter' }),
      );
      await waitFor(() => emulator.state.rollCount(SEARCH) === 1, 'the good key rotated');
      await waitFor(() => mine(objects, 'crd.key_refused').length > 0, 'the refusal audited');
      expect(mine(objects, 'crd.key_refused')).toEqual([
        expect.objectContaining({
          kind: 'RotatedKey',
          object: `${namespace}/foreign`,
          reason: 'OrganizationNotAdmitted',
        }),
      ]);
      const refusedToObserver = told.generations
        .at(-1)
        ?.refusals.filter((refusal) => refusal.object.namespace === namespace);
      expect(refusedToObserver?.map((refusal) => [refusal.object.name, refusal.reason])).toEqual([
        ['foreign', 'OrganizationNotAdmitted'],
      ]);

      // Another object's change builds again: the refusal, unchanged, is not audited again.
      await objects.patchKey('search', { spec: { maxAge: '20d' } });
      await waitFor(
        () => daemon.policy().keys.some((key) => key.maxAgeMs === 20 * 24 * 3600_000),
        'the updated key in force',
      );
      expect(mine(objects, 'crd.key_refused')).toHaveLength(1);
      expect(emulator.state.rollCount(BILLING)).toBe(0);
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([SEARCH]);

      // A settings file that still lists keys fails the reload (SIGHUP): the keys in force stay.
      await writeFile(objects.settingsFile, 'version: 1\nkeys: []\n');
      expect(await daemon.reload()).toMatchObject({ ok: false, errorCode: 'KR_POLICY_INVALID' });
      expect(objects.audit.eventsNamed('policy.reload_failed')).toEqual([
        expect.objectContaining({ file: objects.settingsFile, keysFrom: 'kubernetes' }),
      ]);
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([SEARCH]);
    });

    it('a newcomer copying a key in force is refused (KeyIdInUse) and the key it copied keeps its place, unswapped', async () => {
      const objects = await startObjectsDaemon();
      const { daemon, namespace, emulator, told } = objects;
      await objects.createKey('billing', objects.keySpec(BILLING, 'billing.json'));
      await waitFor(() => emulator.state.rollCount(BILLING) === 1, 'the key rotated');
      await daemon.idle();
      const reloads = objects.audit.eventsNamed('policy.reloaded').length;

      await objects.createKey('copycat', objects.keySpec(BILLING, 'copy.json'));
      await waitFor(() => mine(objects, 'crd.key_refused').length > 0, 'the copy refused');
      expect(mine(objects, 'crd.key_refused')).toEqual([
        expect.objectContaining({ object: `${namespace}/copycat`, reason: 'KeyIdInUse' }),
      ]);
      // The policy did not change: no generation was swapped, the key is the first object's.
      expect(objects.audit.eventsNamed('policy.reloaded')).toHaveLength(reloads);
      expect(told.generations.at(-1)?.keys).toEqual({ [`${namespace}/billing`]: BILLING });
      expect(daemon.policy().keys.map((key) => key.id)).toEqual([BILLING]);
      expect(emulator.state.rollCount(BILLING)).toBe(1);
    });
  });
}
