// `keyroll status --keys-from kubernetes` on the real kube-apiserver with the keyroll.io CRDs
// applied (issue 31 §5: status reads the same state the objects show). A daemon in objects mode
// rotates a two-slot RotatedKey and writes its status; the CLI, as a child process with a
// kubeconfig, lists the objects once, builds the policy as the daemon does and shows the key with
// the last rotation, rotation id, next rotation and active slot its object's status holds. A copy
// of the key's id (KeyIdInUse) and a key of an organization the ClusterKeyApi does not admit are
// rows with their reasons, never dropped, and the copy is not shown the key's state. An identity
// the API server refuses (403), or an API server that cannot be reached, is an error naming the
// request, exit 3. No minted secret appears in any output (the fixture scans each run; the first
// test also scans here). The API server is shared by every test file: rows are picked by this
// test's namespace.
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { request, type Agent } from 'undici';
import { afterEach, describe, expect, it } from 'vitest';
import { staticCredential } from '../../src/api/credentials.ts';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import { Secret } from '../../src/audit/secret.ts';
import { statusTime } from '../../src/crd/controller/key-facts.ts';
import { Daemon } from '../../src/daemon/daemon.ts';
import { OWNER_TOKEN, ORG, useCliFixture, type CliResult } from '../cli/harness.ts';
import { adminAgent, installKeyrollCrds } from '../support/keyroll-crds.ts';
import {
  adminKubeConfig,
  serviceAccountCredentials,
  type KubeApiServerInfo,
} from '../support/kube-apiserver.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { waitFor } from '../support/wait-for.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const BASE = '/apis/keyroll.io/v1alpha1';
const SLOT_A = 'key_demo_billing_a';
const SLOT_B = 'key_demo_billing_b';

interface KeyObject {
  status?: {
    lastRotated?: string;
    lastRotationId?: string;
    nextRotation?: string;
    activeSlot?: string;
    conditions?: { type: string; status: string }[];
  };
}

interface Row {
  object?: string;
  kind?: string;
  keyId: string;
  organizationId: string;
  lastRotatedAt: string | null;
  lastRotationId: string | null;
  nextDueAt: string | null;
  slots?: { active: string | null; standby: string | null };
  refused?: { reason: string; message: string };
  error?: { errorCode: string };
}

interface StatusJson {
  policy: string;
  keysFrom?: string;
  keys: Row[];
}

async function call(
  kube: KubeApiServerInfo,
  agent: Agent,
  method: 'GET' | 'POST' | 'DELETE',
  path: string,
  body?: unknown,
): Promise<unknown> {
  const response = await request(`${kube.server}${path}`, {
    method,
    dispatcher: agent,
    headers: { 'content-type': 'application/json', accept: 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.body.text();
  if (response.statusCode >= 300)
    throw new Error(`${method} ${path} answered ${String(response.statusCode)}: ${text}`);
  return JSON.parse(text) as unknown;
}

/** A port nothing listens on (bound, then released). */
async function closedPort(): Promise<number> {
  const listener = createServer();
  await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
  const { port } = listener.address() as AddressInfo;
  await new Promise<void>((resolve) =>
    listener.close(() => {
      resolve();
    }),
  );
  return port;
}

if (server === undefined) {
  describe.skip('keyroll status --keys-from kubernetes (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  await installKeyrollCrds(kube);
  const cli = useCliFixture();
  const cleanups: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  /** This test's namespace, a ClusterKeyApi (the fixture's emulator), a file ClusterKeyStore, the settings file and an admin kubeconfig. */
  async function world() {
    const suffix = randomBytes(4).toString('hex');
    const namespace = `status-${suffix}`;
    const keyrollNamespace = `keyroll-${suffix}`;
    const api = `api-${suffix}`;
    const store = `files-${suffix}`;
    const agent = adminAgent(kube);
    cleanups.push(() => agent.close());
    const core = adminKubeConfig(kube).makeApiClient(CoreV1Api);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    cleanups.push(() => core.deleteNamespace({ name: namespace }));
    await call(kube, agent, 'POST', `${BASE}/clusterkeyapis`, {
      apiVersion: 'keyroll.io/v1alpha1',
      kind: 'ClusterKeyApi',
      metadata: { name: api },
      spec: {
        baseUrl: cli.emulator.url,
        credential: { type: 'bearer', token: 'env:KEYROLL_API_TOKEN' },
        rateLimitPerMinute: 6000,
        conditions: [{ namespaces: [namespace], organizations: [ORG] }],
      },
    });
    cleanups.push(() => call(kube, agent, 'DELETE', `${BASE}/clusterkeyapis/${api}`));
    await call(kube, agent, 'POST', `${BASE}/clusterkeystores`, {
      apiVersion: 'keyroll.io/v1alpha1',
      kind: 'ClusterKeyStore',
      metadata: { name: store },
      spec: { kind: 'file', directory: cli.secretsDir, conditions: [{ namespaces: [namespace] }] },
    });
    cleanups.push(() => call(kube, agent, 'DELETE', `${BASE}/clusterkeystores/${store}`));
    const settingsFile = await cli.writeFile('settings.yaml', `version: 1\nkeyApi: ${api}\n`);
    const kubeconfig = await cli.writeFile('kubeconfig', adminKubeConfig(kube).exportConfig());
    const keys = `${BASE}/namespaces/${namespace}/rotatedkeys`;
    return {
      namespace,
      keyrollNamespace,
      settingsFile,
      kubeconfig,
      createKey: (name: string, spec: Record<string, unknown>) =>
        call(kube, agent, 'POST', keys, {
          apiVersion: 'keyroll.io/v1alpha1',
          kind: 'RotatedKey',
          metadata: { name, namespace },
          spec,
        }),
      readKey: async (name: string) => (await call(kube, agent, 'GET', `${keys}/${name}`)) as KeyObject,
      keySpec: (id: string, path: string, extra: Record<string, unknown> = {}) => ({
        id,
        organization: ORG,
        apiRef: { name: api },
        destinations: [{ storeRef: { kind: 'ClusterKeyStore', name: store }, path: `${namespace}/${path}` }],
        maxAge: '30d',
        ...extra,
      }),
      status: (extra: readonly string[], kubeconfigFile = kubeconfig): Promise<CliResult> =>
        cli.run(
          [
            'status',
            '--keys-from',
            'kubernetes',
            '--keyroll-namespace',
            keyrollNamespace,
            '-p',
            'settings.yaml',
            ...extra,
          ],
          { env: { KUBECONFIG: kubeconfigFile, POD_NAMESPACE: undefined, KEYROLL_KEYS_FROM: undefined } },
        ),
    };
  }
  type World = Awaited<ReturnType<typeof world>>;

  /** keyroll's daemon in objects mode, writing each RotatedKey's status (the product's status writer). */
  async function startDaemon(w: World): Promise<Daemon> {
    const daemon = await Daemon.start({
      policyFile: w.settingsFile,
      keysFrom: {
        kubeConfig: adminKubeConfig(kube),
        namespace: w.keyrollNamespace,
        debounce: { quietMs: 20, maxDelayMs: 100 },
        watchBackoff: { initialMs: 20, maxMs: 200 },
      },
      listen: { host: '127.0.0.1', port: 0 },
      audit: createMemoryAuditLog(),
      checkIntervalMs: 24 * 3600_000,
      concurrency: 1,
      runtime: {
        credentials: staticCredential(new Secret(OWNER_TOKEN), 'test owner token'),
        sleep: () => Promise.resolve(),
      },
    });
    cleanups.push(() => daemon.shutdown());
    return daemon;
  }

  const mine = (w: World, result: CliResult): Map<string, Row> =>
    new Map(
      (JSON.parse(result.stdout) as StatusJson).keys
        .filter((row) => row.object?.startsWith(`${w.namespace}/`) === true)
        .map((row) => [row.object ?? '', row]),
    );

  describe('keyroll status --keys-from kubernetes (kube-apiserver)', () => {
    it("shows a RotatedKey the daemon rotated with its object's last rotation, next rotation and active slot; refused objects are rows with their reasons", async () => {
      const w = await world();
      const daemon = await startDaemon(w);
      await w.createKey(
        'billing',
        w.keySpec('billing-api', 'billing-api.json', { slots: [SLOT_A, SLOT_B], consumerRefresh: '1h' }),
      );
      let key: KeyObject = {};
      await waitFor(async () => {
        key = await w.readKey('billing');
        const ready = key.status?.conditions?.find((c) => c.type === 'Ready');
        return ready?.status === 'True' && key.status?.activeSlot !== undefined;
      }, 'the daemon rotated the key and wrote Ready=True with its active slot');
      await daemon.idle();
      // A newcomer copying the key's id, and a key of an organization the ClusterKeyApi does not admit here.
      await w.createKey('copycat', w.keySpec('billing-api', 'copy.json'));
      await w.createKey(
        'foreign',
        w.keySpec('key_demo_search', 'search.json', { organization: 'org_demo_starter' }),
      );

      const json = await w.status(['-o', 'json']);
      expect(json.code, json.stderr).toBe(0);
      const parsed = JSON.parse(json.stdout) as StatusJson;
      expect([parsed.keysFrom, parsed.policy]).toEqual(['kubernetes', 'settings.yaml']);
      const rows = mine(w, json);
      const billing = rows.get(`${w.namespace}/billing`);
      // The same facts the status writer put into the object.
      expect(billing).toMatchObject({ keyId: 'billing-api', organizationId: ORG });
      expect(statusTime(billing?.lastRotatedAt ?? '')).toBe(key.status?.lastRotated);
      expect(billing?.lastRotationId).toBe(key.status?.lastRotationId);
      expect(statusTime(billing?.nextDueAt ?? '')).toBe(key.status?.nextRotation);
      expect(billing?.slots?.active).toBe(key.status?.activeSlot);
      expect([SLOT_A, SLOT_B]).toContain(billing?.slots?.active);
      expect(billing?.refused).toBeUndefined();
      // The copy is refused and shown as such, never with the key's state.
      expect(rows.get(`${w.namespace}/copycat`)).toMatchObject({
        kind: 'RotatedKey',
        keyId: 'billing-api',
        lastRotatedAt: null,
        lastRotationId: null,
        refused: {
          reason: 'KeyIdInUse',
          message: `RotatedKey ${w.namespace}/billing already rotates billing-api`,
        },
      });
      expect(rows.get(`${w.namespace}/copycat`)?.slots).toBeUndefined();
      expect(rows.get(`${w.namespace}/foreign`)).toMatchObject({
        keyId: 'key_demo_search',
        organizationId: 'org_demo_starter',
        refused: { reason: 'OrganizationNotAdmitted' },
      });
      expect(json.stderr).toContain(`keyroll: ${w.namespace}/foreign is refused (OrganizationNotAdmitted: `);
      expect(json.stderr).toContain(`keyroll: ${w.namespace}/copycat is refused (KeyIdInUse: `);

      const table = await w.status(['-o', 'table', '--no-consumers']);
      expect(table.code, table.stderr).toBe(0);
      expect(table.stdout).toMatch(/^OBJECT\s+KEY\s+ORG\s+LAST ROTATED\s+NEXT DUE\s+OVERDUE\s+SLOTS\s+LOCK/);
      expect(table.stdout).toMatch(
        new RegExp(
          `\\n${w.namespace}/billing\\s+billing-api\\s+${ORG}\\s+${billing?.lastRotatedAt ?? 'x'}\\s`,
        ),
      );
      expect(table.stdout).toMatch(
        new RegExp(
          `\\n${w.namespace}/copycat\\s+billing-api\\s+${ORG}\\s+-\\s+not rotated\\s.*REFUSED KeyIdInUse: `,
        ),
      );

      // A secret is stored, and none appears in what status printed.
      const stored = JSON.parse(
        await readFile(join(cli.secretsDir, w.namespace, 'billing-api.json'), 'utf8'),
      ) as {
        apiKey: string;
      };
      expect(cli.emulator.state.mintedSecrets()).toContain(stored.apiKey);
      expectNoSecrets(
        [json.stdout, json.stderr, table.stdout, table.stderr],
        [...cli.emulator.state.mintedSecrets(), OWNER_TOKEN],
      );
    });

    it("keyroll resume --keys-from kubernetes lifts a RotatedKey's quarantine, named by namespace/name; a refused object's resume says why and changes nothing", async () => {
      const w = await world();
      cli.emulator.faults.inject('roll', { kind: 'status', status: 403 }, 1);
      const daemon = await startDaemon(w);
      await w.createKey(
        'billing',
        w.keySpec('billing-api', 'billing-api.json', { failures: { quarantineAfter: 1 } }),
      );
      await waitFor(async () => {
        const key = await w.readKey('billing');
        return key.status?.conditions?.some((c) => c.type === 'Quarantined' && c.status === 'True') === true;
      }, 'the failed roll quarantined the key (Quarantined=True)');
      await daemon.idle();
      await w.createKey('copycat', w.keySpec('billing-api', 'copy.json'));
      const resume = (key: string): Promise<CliResult> =>
        cli.run(
          [
            'resume',
            '--keys-from',
            'kubernetes',
            '--keyroll-namespace',
            w.keyrollNamespace,
            '-p',
            'settings.yaml',
            '--key',
            key,
            '--actor',
            'alice',
          ],
          { env: { KUBECONFIG: w.kubeconfig, POD_NAMESPACE: undefined, KEYROLL_KEYS_FROM: undefined } },
        );

      // The copy is refused: it has no key of its own to resume, and the error says why.
      const copy = await resume(`${w.namespace}/copycat`);
      expect(copy.code, copy.stderr).toBe(2);
      expect(copy.stderr).toContain(`RotatedKey ${w.namespace}/copycat is refused (KeyIdInUse: `);
      const missing = await resume(`${w.namespace}/nothing`);
      expect(missing.code).toBe(2);
      expect(missing.stderr).toContain(`no RotatedKey ${w.namespace}/nothing`);

      const lifted = await resume(`${w.namespace}/billing`);
      expect(lifted.code, lifted.stderr).toBe(0);
      expect(lifted.stderr).toMatch(
        /^keyroll: billing-api: quarantine \(since .*\) lifted after 1 consecutive failures/,
      );
      const events = lifted.stdout
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { event: string; keyId?: string; actor?: string });
      expect(events.find((event) => event.event === 'key.resumed')).toMatchObject({
        keyId: 'billing-api',
        actor: 'alice',
      });
      // The streak is gone from the key's record: a second resume finds nothing to lift.
      const again = await resume('billing-api');
      expect(again.code, again.stderr).toBe(0);
      expect(again.stderr).toContain('billing-api is neither quarantined nor backing off');
      expectNoSecrets(
        [copy.stdout, copy.stderr, lifted.stdout, lifted.stderr, again.stdout, again.stderr],
        [...cli.emulator.state.mintedSecrets(), OWNER_TOKEN],
      );
    });

    it('an identity the API server refuses (403) or an API server out of reach is an error naming the request, exit 3', async () => {
      const w = await world();
      await w.createKey('billing', w.keySpec('billing-api', 'billing-api.json'));
      // A service account bound to nothing: every list is forbidden.
      const nobody = await serviceAccountCredentials(kube, w.namespace, 'nobody');
      const forbidden = await w.status(
        ['-o', 'json'],
        await cli.writeFile('nobody-kubeconfig', nobody.kubeConfig.exportConfig()),
      );
      expect(forbidden.code).toBe(3);
      expect(forbidden.stdout).toBe('');
      expect(forbidden.stderr).toMatch(
        /^keyroll: get \/api(s\/keyroll\.io\/v1alpha1)?\/[a-z]+: the API server answered 403 \(.*cannot list resource/,
      );
      expect(forbidden.stderr).not.toContain(nobody.token);

      const away = new KubeConfig();
      away.loadFromOptions({
        clusters: [
          { name: 'away', server: `https://127.0.0.1:${String(await closedPort())}`, skipTLSVerify: false },
        ],
        users: [{ name: 'someone', token: 'not-a-token' }],
        contexts: [{ name: 'away', cluster: 'away', user: 'someone' }],
        currentContext: 'away',
      });
      const unreachable = await w.status(
        ['-o', 'json'],
        await cli.writeFile('away-kubeconfig', away.exportConfig()),
      );
      expect(unreachable.code).toBe(3);
      expect(unreachable.stdout).toBe('');
      expect(unreachable.stderr).toMatch(
        /^keyroll: get \/api(s\/keyroll\.io\/v1alpha1)?\/[a-z]+: the API server could not be reached/,
      );
    });
  });
}
