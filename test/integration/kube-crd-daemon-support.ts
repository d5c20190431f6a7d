// What the tests of `keyroll daemon --keys-from kubernetes` on the real kube-apiserver share
// (kube-crd-daemon.test.ts, kube-crd-daemon-conditions.test.ts): a daemon in objects mode started
// per test with a namespace, a ClusterKeyApi (the emulator) and a file ClusterKeyStore of its own.
// The daemon acts as keyroll's service account bound to the ClusterRole the chart renders for
// daemon.keysFrom kubernetes (helm template, applied as is, named per test): a permission the
// chart forgot would leave the watch forbidden and the daemon never started. The API server is
// shared by every test file: other files' objects are there too.
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
import { afterEach, expect } from 'vitest';
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

export const BASE = '/apis/keyroll.io/v1alpha1';
export const ORG = 'org_demo_acme';
export const OWNER_TOKEN = 'demo-owner-token';

export interface KeyCondition {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
}

/** The parts of a RotatedKey the status tests read. */
export interface KeyObject {
  metadata: { annotations?: Record<string, string>; generation?: number };
  status?: {
    observedGeneration?: number;
    lastRotated?: string;
    nextRotation?: string;
    lastRotationId?: string;
    failedAttempts?: number;
    conditions?: KeyCondition[];
    rotateNow?: { value: string; outcome?: string; requestedBy?: string };
  };
}

/** A core/v1 Event on a RotatedKey, as `kubectl describe` lists it. */
export interface KeyEvent {
  type?: string;
  reason?: string;
  message?: string;
  involvedObject: { name?: string; kind?: string };
}

/** What the observer was told, in order. */
export interface Told {
  generations: { keys: Record<string, string>; refusals: Refusal[] }[];
  outcomes: { keyId: string; result: string }[];
  leading: boolean[];
}

export interface ObjectsDaemonOptions {
  /** Without an observer: the daemon writes the objects' status itself (daemon/object-status.ts). */
  statusWriter?: boolean;
  /** The daemon's clock (a test moves it past a failure's backoff). */
  now?: () => Date;
  /** The daemon's --metrics-token (env:NAME or file:/path), read again by every generation's prepare. */
  metricsTokenRef?: string;
}

export interface ObjectsDaemon {
  daemon: Daemon;
  namespace: string;
  audit: MemoryAuditLog;
  emulator: RunningEmulator;
  alerter: RecordingAlerter;
  told: Told;
  secretsDir: string;
  /** A directory of this test's own, removed after it. */
  tempDir: string;
  /** The daemon's --policy: the settings every key shares. */
  settingsFile: string;
  createKey(name: string, spec: Record<string, unknown>): Promise<void>;
  patchKey(name: string, patch: Record<string, unknown>): Promise<void>;
  deleteKey(name: string): Promise<void>;
  /** The RotatedKey as the API server holds it (admin). */
  readKey(name: string): Promise<KeyObject>;
  /** The Events recorded on the RotatedKey `name`, oldest first. */
  events(name: string): Promise<KeyEvent[]>;
  /** The row of `kubectl get rotatedkeys` for `name` (the API server's Table), by column name. */
  row(name: string): Promise<Record<string, unknown>>;
  /** The spec of a key stored by the ClusterKeyStore under this test's namespace. */
  keySpec(id: string, path: string, extra?: Record<string, unknown>): Record<string, unknown>;
}

export async function call(
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

/**
 * Installs the CRDs and registers the cleanup of every daemon a test starts (after it); call at
 * the top of a test file. Each daemon's cleanup checks that no minted secret, nor keyroll's token,
 * reached an audit line or an alert (invariant 3).
 */
export async function useObjectsDaemons(
  kube: KubeApiServerInfo,
): Promise<(options?: ObjectsDaemonOptions) => Promise<ObjectsDaemon>> {
  await installKeyrollCrds(kube);
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  return (options = {}) => startObjectsDaemon(kube, cleanups, options);
}

/** A namespace, a ClusterKeyApi (the emulator) and a file ClusterKeyStore of its own, and a daemon watching every object. */
async function startObjectsDaemon(
  kube: KubeApiServerInfo,
  cleanups: (() => Promise<void>)[],
  options: ObjectsDaemonOptions,
): Promise<ObjectsDaemon> {
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
    ...(options.now === undefined ? {} : { now: options.now }),
    ...(options.metricsTokenRef === undefined ? {} : { metricsTokenRef: options.metricsTokenRef }),
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
    alerter,
    told,
    secretsDir,
    tempDir: temp.path,
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
    events: async (name) => {
      const response = await request(
        `${kube.server}/api/v1/namespaces/${namespace}/events?fieldSelector=involvedObject.name%3D${name}`,
        { dispatcher: agent },
      );
      const list = (await response.body.json()) as {
        items: (KeyEvent & { metadata?: { resourceVersion?: string } })[];
      };
      // The API server lists by name, and an Event's name ends in a random suffix: put them in the
      // order they were written (etcd's revision, which a create raises), as `kubectl describe` does by time.
      return list.items.sort(
        (a, b) => Number(a.metadata?.resourceVersion ?? 0) - Number(b.metadata?.resourceVersion ?? 0),
      );
    },
    row: async (name) => {
      const response = await request(`${kube.server}${keys}`, {
        dispatcher: agent,
        headers: { accept: 'application/json;as=Table;g=meta.k8s.io;v=v1' },
      });
      const table = (await response.body.json()) as {
        columnDefinitions: { name: string }[];
        rows: { cells: unknown[]; object: { metadata: { name: string } } }[];
      };
      const found = table.rows.find((candidate) => candidate.object.metadata.name === name);
      return Object.fromEntries(
        table.columnDefinitions.map((column, at) => [column.name.toUpperCase(), found?.cells[at]]),
      );
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

export const storedValue = async (objects: ObjectsDaemon, path: string): Promise<string> =>
  readFile(join(objects.secretsDir, objects.namespace, path), 'utf8');

export const apiKeyOf = (text: string): string => (JSON.parse(text) as { apiKey: string }).apiKey;

/** The audit events of `event` about this test's own objects. */
export const mine = (objects: ObjectsDaemon, event: AuditEventName) =>
  objects.audit
    .eventsNamed(event)
    .filter((record) => String(record['object']).startsWith(`${objects.namespace}/`));

/** The daemon's clock: the real one, moved forward by the test (past a failure's backoff). */
export function movableClock(): { now: () => Date; advance(ms: number): void } {
  let offsetMs = 0;
  return {
    now: () => new Date(Date.now() + offsetMs),
    advance: (ms) => {
      offsetMs += ms;
    },
  };
}
