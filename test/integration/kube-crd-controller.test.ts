// The RotatedKey controller (src/crd/controller/) on the real kube-apiserver with the keyroll.io
// CRDs applied, fed as the daemon feeds it (generations, outcomes, deliveries, leadership, the
// RotatedKey reflector's changes) with a key record and a rotate-now port of the test's own:
// the status is written once per change (at most two writes per rotation, none when nothing
// changed), nothing at all while not leading, a refusal is Ready=False with its reason, a rotation
// records an Event, a 409 is read again and written; a rotate-now annotation is rotated once,
// settled in status.rotateNow with the field manager that set it, removed, and not rotated again
// on a resync; and `kubectl get` (the API server's Table) shows READY, LAST ROTATED, NEXT, SLOT.
import { randomBytes } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import { request, type Agent } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import type { KeyState } from '../../src/backends/types.ts';
import { KubeAnnotationClient } from '../../src/crd/controller/annotation-client.ts';
import { StatusReporter } from '../../src/crd/controller/reporter.ts';
import type { RotateNowCall } from '../../src/crd/controller/rotate-now.ts';
import { findCondition, type Condition } from '../../src/crd/status/conditions.ts';
import { KubeResourceClient, type ObjectRequests } from '../../src/crd/watch/kube-client.ts';
import { Reflector } from '../../src/crd/watch/reflector.ts';
import type { WatchedObject, WatchedResource } from '../../src/crd/watch/resource.ts';
import type { KeyOutcome } from '../../src/rotation/types.ts';
import {
  adminKubeConfig,
  serviceAccountCredentials,
  type KubeApiServerInfo,
} from '../support/kube-apiserver.ts';
import { adminAgent, installKeyrollCrds } from '../support/keyroll-crds.ts';
import { waitFor } from '../support/wait-for.ts';
import { DEPLOYMENT, keyWith, rotated } from '../crd/controller/fixtures.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const BASE = '/apis/keyroll.io/v1alpha1';
const NOW = new Date('2026-11-29T10:00:00Z');

/** Counts each request the controller sends, by kind. */
function counting(
  inner: ObjectRequests,
): ObjectRequests & { count: { get: number; patch: number; create: number } } {
  const count = { get: 0, patch: 0, create: 0 };
  return {
    count,
    get: (ref, signal) => {
      count.get++;
      return inner.get(ref, signal);
    },
    patchStatus: (ref, patch, signal) => {
      count.patch++;
      return inner.patchStatus(ref, patch, signal);
    },
    create: (resource, namespace, body, signal) => {
      count.create++;
      return inner.create(resource, namespace, body, signal);
    },
  };
}

const conditionsOf = (object: WatchedObject): Condition[] =>
  (object.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];

if (server === undefined) {
  describe.skip('the RotatedKey controller (the Kubernetes API server is not available)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube: KubeApiServerInfo = server;
  const agent: Agent = adminAgent(kube);
  const config = adminKubeConfig(kube);
  const client = new KubeResourceClient(config);
  const signal = AbortSignal.timeout(120_000);

  async function call(
    method: 'GET' | 'POST' | 'PATCH',
    path: string,
    body?: unknown,
    headers: Record<string, string> = {},
  ): Promise<{ status: number; body: Record<string, unknown> }> {
    const response = await request(`${kube.server}${path}`, {
      method,
      dispatcher: agent,
      headers: { 'content-type': 'application/json', accept: 'application/json', ...headers },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    return { status: response.statusCode, body: (await response.body.json()) as Record<string, unknown> };
  }

  /** A namespace of its own with RotatedKeys named `names`, a reflector on them, and a reporter. */
  async function setUp(
    names: string[],
    options: { port?: (keyId: string, call: RotateNowCall) => Promise<KeyOutcome>; consumers?: boolean } = {},
  ) {
    const namespace = `keyroll-ctl-${randomBytes(4).toString('hex')}`;
    await serviceAccountCredentials(kube, namespace, 'team');
    for (const name of names) {
      const created = await call('POST', `${BASE}/namespaces/${namespace}/rotatedkeys`, {
        apiVersion: 'keyroll.io/v1alpha1',
        kind: 'RotatedKey',
        metadata: { name, namespace },
        spec: {
          id: `key_${name}`,
          organization: 'org_billing',
          apiRef: { name: 'acme' },
          destinations: [
            { storeRef: { kind: 'ClusterKeyStore', name: 'vault' }, path: `${namespace}/${name}` },
          ],
          maxAge: '30d',
        },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
    }
    const resource: WatchedResource = {
      group: 'keyroll.io',
      version: 'v1alpha1',
      plural: 'rotatedkeys',
      namespace,
    };
    const requests = counting(client);
    const audit = createMemoryAuditLog();
    const key = keyWith(options.consumers === true ? { consumers: [DEPLOYMENT] } : {});
    const record: { state: KeyState } = {
      state: { exists: true, lastRotatedAt: '2026-11-01T08:00:00Z', lastRotationId: 'rot_1' },
    };
    const rotateCalls: RotateNowCall[] = [];
    const stop = new AbortController();
    let current: StatusReporter | undefined;
    const reflector = new Reflector({
      requests: client,
      resource,
      audit,
      onChange: (change) => current?.onObjectChange(change),
    });
    /** A reporter as a (new) daemon replica makes it; the reflector's changes go to the latest. */
    const makeReporter = (): StatusReporter => {
      const reporter: StatusReporter = new StatusReporter({
        requests,
        resource,
        objects: reflector,
        keyPolicy: (keyId) => ({ ...key, id: keyId }),
        readTrustedState: () => Promise.resolve(record.state),
        audit,
        now: () => NOW,
        rotateNow: {
          annotations: new KubeAnnotationClient(config),
          port: async (keyId, rotateCall) => {
            rotateCalls.push(rotateCall);
            const outcome = await (options.port?.(keyId, rotateCall) ??
              Promise.resolve(
                rotated({
                  keyId,
                  reason: rotateCall.reason,
                  rotationId: `rot_now_${String(rotateCalls.length)}`,
                }),
              ));
            // The rotation recorded its end at the key's destination, as a real one does.
            if (outcome.rotatedAt !== undefined)
              record.state = {
                ...record.state,
                lastRotatedAt: outcome.rotatedAt,
                lastRotationId: outcome.rotationId,
              };
            // The daemon's own outcome path runs before runOne resolves, as the launcher's does.
            reporter.onKeyOutcome(keyId, outcome);
            return outcome;
          },
        },
      });
      current = reporter;
      return reporter;
    };
    const reporter = makeReporter();
    const running = reflector.run(stop.signal);
    await reflector.synced;
    const keys = new Map(names.map((name) => [`${namespace}/${name}`, `key_${name}`]));
    const read = (name: string): Promise<WatchedObject> => client.get({ resource, namespace, name }, signal);
    const events = async (): Promise<
      { reason?: string; type?: string; message?: string; involvedObject: { name?: string } }[]
    > => (await config.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace })).items;
    const close = async (): Promise<void> => {
      stop.abort();
      await running;
    };
    return {
      namespace,
      resource,
      requests,
      audit,
      reporter,
      makeReporter,
      reflector,
      keys,
      record,
      rotateCalls,
      read,
      events,
      close,
    };
  }

  describe('the RotatedKey controller on the real kube-apiserver', () => {
    beforeAll(async () => {
      await installKeyrollCrds(kube);
    });
    afterAll(async () => {
      await agent.close();
    });

    it('writes the status once per change: one write for the key, none for the same facts, at most two per rotation; and an Event', async () => {
      const t = await setUp(['billing-api'], { consumers: true });
      try {
        t.reporter.onLeadership(true);
        t.reporter.onGeneration(t.keys, []);
        await t.reporter.idle();
        expect(t.reporter.counts.writes).toBe(1);
        const first = await t.read('billing-api');
        expect(first.status).toMatchObject({
          observedGeneration: 1,
          lastRotated: '2026-11-01T08:00:00Z',
          nextRotation: '2026-12-01T08:00:00Z',
          activeSlot: 'key_billing-api',
          failedAttempts: 0,
          lastRotationId: 'rot_1',
        });
        expect(findCondition(conditionsOf(first), 'Ready')).toMatchObject({
          status: 'True',
          reason: 'Rotated',
        });

        // The same generation again, and leadership confirmed again: nothing new, nothing sent.
        await waitFor(
          () =>
            t.reflector.get(`${t.namespace}/billing-api`)?.metadata?.resourceVersion ===
            first.metadata?.resourceVersion,
          'the reflector holds our write',
        );
        const patchesBefore = t.requests.count.patch;
        t.reporter.onGeneration(t.keys, []);
        t.reporter.onLeadership(true);
        await t.reporter.idle();
        expect(t.requests.count.patch).toBe(patchesBefore);

        // One rotation: its outcome, then its consumers' delivery. Two writes, not more.
        const writesBefore = t.reporter.counts.writes;
        const sentBefore = t.requests.count.patch;
        t.reporter.onKeyOutcome('key_billing-api', rotated({ keyId: 'key_billing-api' }));
        await t.reporter.idle();
        t.reporter.onConsumers('key_billing-api', { refreshed: 1, failed: 0, deferred: 0, skipped: 0 });
        await t.reporter.idle();
        expect(t.reporter.counts.writes - writesBefore).toBe(2);
        // Counted on the wire too: every status PATCH sent, 409s included.
        expect(t.requests.count.patch - sentBefore).toBe(2);
        const after = await t.read('billing-api');
        expect(after.status).toMatchObject({
          lastRotated: '2026-11-29T10:00:00Z',
          nextRotation: '2026-12-29T10:00:00Z',
          lastRotationId: 'rot_2',
        });
        expect(findCondition(conditionsOf(after), 'ConsumersRefreshed')).toMatchObject({
          status: 'True',
          reason: 'Refreshed',
        });
        const recorded = await t.events();
        expect(recorded.map((event) => event.reason).sort()).toEqual(['ConsumersRefreshed', 'Rotated']);
        expect(recorded.every((event) => event.involvedObject.name === 'billing-api')).toBe(true);
        expect(t.audit.eventsNamed('crd.status.failed')).toEqual([]);
      } finally {
        await t.close();
      }
    });

    it('does nothing while not leading; on becoming leader writes each status once', async () => {
      const t = await setUp(['a', 'b']);
      try {
        t.reporter.onGeneration(t.keys, []);
        t.reporter.onKeyOutcome('key_a', rotated({ keyId: 'key_a' }));
        await call(
          'PATCH',
          `${BASE}/namespaces/${t.namespace}/rotatedkeys/a`,
          { metadata: { annotations: { 'keyroll.io/rotate-now': 'manual' } } },
          { 'content-type': 'application/merge-patch+json' },
        );
        await waitFor(
          () => t.reflector.get(`${t.namespace}/a`)?.metadata?.annotations !== undefined,
          'the annotation seen',
        );
        await t.reporter.idle();
        expect(t.requests.count).toEqual({ get: 0, patch: 0, create: 0 });
        expect(t.rotateCalls).toEqual([]);
        expect((await t.read('b')).status).toBeUndefined();

        t.reporter.onLeadership(true);
        await t.reporter.idle();
        await waitFor(() => t.rotateCalls.length === 1, 'the rotate-now served by the new leader');
        await waitFor(
          async () => (await t.read('a')).metadata?.annotations?.['keyroll.io/rotate-now'] === undefined,
          'the annotation removed',
        );
        await t.reporter.idle();
        expect(findCondition(conditionsOf(await t.read('b')), 'Ready')).toMatchObject({ status: 'True' });
        expect((await t.read('a')).status).toMatchObject({
          rotateNow: { value: 'manual', outcome: 'Rotated' },
        });

        // Leadership lost: the next outcome is kept, not written.
        t.reporter.onLeadership(false);
        const patches = t.requests.count.patch;
        t.reporter.onKeyOutcome('key_b', rotated({ keyId: 'key_b', rotationId: 'rot_b' }));
        await t.reporter.idle();
        expect(t.requests.count.patch).toBe(patches);
      } finally {
        await t.close();
      }
    });

    it('a refused key is Ready=False with the refusal reason, and a Refused Event', async () => {
      const t = await setUp(['intruder']);
      try {
        t.reporter.onLeadership(true);
        t.reporter.onGeneration(new Map(), [
          {
            object: { kind: 'RotatedKey', namespace: t.namespace, name: 'intruder' },
            reason: 'OrganizationNotAdmitted',
            message: 'no condition of ClusterKeyApi acme admits this namespace for org_billing',
          },
        ]);
        await t.reporter.idle();
        const stored = await t.read('intruder');
        expect(findCondition(conditionsOf(stored), 'Ready')).toMatchObject({
          status: 'False',
          reason: 'OrganizationNotAdmitted',
          message: 'no condition of ClusterKeyApi acme admits this namespace for org_billing',
          observedGeneration: 1,
        });
        expect(stored.status).toMatchObject({ observedGeneration: 1 });
        expect((await t.events()).map((event) => [event.type, event.reason])).toEqual([
          ['Warning', 'Refused'],
        ]);
      } finally {
        await t.close();
      }
    });

    it("a write over a stale copy meets 409, is read again and lands, keeping the other writer's field", async () => {
      const t = await setUp(['contended']);
      try {
        const key = `${t.namespace}/contended`;
        await waitFor(() => t.reflector.get(key) !== undefined, 'the object listed');
        const stale = t.reflector.get(key);
        // Another writer changes the status before ours; our copy stays the stale one.
        const earlier = { value: 'manual', settledAt: '2026-11-28T00:00:00Z', outcome: 'Rotated' };
        await client.patchStatus(
          { resource: t.resource, name: 'contended' },
          { status: { rotateNow: earlier } },
          signal,
        );
        const reporter = new StatusReporter({
          requests: t.requests,
          resource: t.resource,
          objects: { get: (wanted) => (wanted === key ? stale : undefined) },
          keyPolicy: (keyId) => ({ ...keyWith(), id: keyId }),
          readTrustedState: () => Promise.resolve(t.record.state),
          audit: t.audit,
          now: () => NOW,
        });
        reporter.onLeadership(true);
        reporter.onGeneration(t.keys, []);
        await reporter.idle();
        expect(reporter.counts).toMatchObject({ writes: 1, conflicts: 1 });
        const stored = await t.read('contended');
        expect(stored.status).toMatchObject({
          rotateNow: earlier,
          failedAttempts: 0,
          lastRotationId: 'rot_1',
        });
        expect(t.audit.eventsNamed('crd.status.failed')).toEqual([]);
      } finally {
        await t.close();
      }
    });

    it('rotate-now: rotated once through the port, settled with who asked, the annotation removed, not rotated again on resync', async () => {
      const t = await setUp(['billing-api']);
      try {
        t.reporter.onLeadership(true);
        t.reporter.onGeneration(t.keys, []);
        await t.reporter.idle();
        const writesBefore = t.reporter.counts.writes;
        const value = 'leak: pasted in a ticket';
        const annotated = await call(
          'PATCH',
          `${BASE}/namespaces/${t.namespace}/rotatedkeys/billing-api?fieldManager=kubectl-annotate`,
          { metadata: { annotations: { 'keyroll.io/rotate-now': value } } },
          { 'content-type': 'application/merge-patch+json' },
        );
        expect(annotated.status).toBe(200);
        await waitFor(
          async () =>
            (await t.read('billing-api')).metadata?.annotations?.['keyroll.io/rotate-now'] === undefined,
          'the annotation removed',
        );
        await t.reporter.idle();
        expect(t.rotateCalls).toEqual([
          {
            reason: 'leak',
            text: 'pasted in a ticket',
            requestedBy: 'kubectl-annotate',
            object: `${t.namespace}/billing-api`,
          },
        ]);
        const settled = await t.read('billing-api');
        expect(settled.status).toMatchObject({
          rotateNow: {
            value,
            requestedBy: 'kubectl-annotate',
            settledAt: '2026-11-29T10:00:00Z',
            outcome: 'Rotated',
          },
          lastRotated: '2026-11-29T10:00:00Z',
          lastRotationId: 'rot_now_1',
        });
        // The rotation's outcome and the settle share one write.
        expect(t.reporter.counts.writes - writesBefore).toBe(1);
        expect((await t.events()).map((event) => event.reason).sort()).toEqual([
          'RotateNowSettled',
          'Rotated',
        ]);
        expect(t.audit.eventsNamed('crd.rotate_now.settled')).toMatchObject([
          {
            object: `${t.namespace}/billing-api`,
            reason: 'leak',
            requestedBy: 'kubectl-annotate',
            outcome: 'Rotated',
          },
        ]);

        // The same value written again while this replica no longer leads; a new leader (a new
        // process: nothing in memory) resyncs and finds it settled in the status: not rotated again.
        t.reporter.onLeadership(false);
        await call(
          'PATCH',
          `${BASE}/namespaces/${t.namespace}/rotatedkeys/billing-api?fieldManager=kubectl-annotate`,
          { metadata: { annotations: { 'keyroll.io/rotate-now': value } } },
          { 'content-type': 'application/merge-patch+json' },
        );
        await waitFor(
          () =>
            t.reflector.get(`${t.namespace}/billing-api`)?.metadata?.annotations?.[
              'keyroll.io/rotate-now'
            ] === value,
          'the repeated annotation seen',
        );
        const next = t.makeReporter();
        next.onGeneration(t.keys, []);
        next.onLeadership(true);
        await waitFor(
          async () =>
            (await t.read('billing-api')).metadata?.annotations?.['keyroll.io/rotate-now'] === undefined,
          'the repeated annotation removed',
        );
        await next.idle();
        expect(t.rotateCalls).toHaveLength(1);
        expect(next.counts.writes).toBe(0);
      } finally {
        await t.close();
      }
    });

    it('kubectl get shows READY, LAST ROTATED, NEXT and SLOT once the controller reported', async () => {
      const t = await setUp(['billing-api']);
      try {
        t.reporter.onLeadership(true);
        t.reporter.onGeneration(t.keys, []);
        await t.reporter.idle();
        const table = await call('GET', `${BASE}/namespaces/${t.namespace}/rotatedkeys`, undefined, {
          accept: 'application/json;as=Table;g=meta.k8s.io;v=v1',
        });
        const columns = (table.body['columnDefinitions'] as { name: string }[]).map((column) =>
          column.name.toUpperCase(),
        );
        const row = (table.body['rows'] as { cells: unknown[] }[])[0];
        const cell = (name: string): unknown => row?.cells[columns.indexOf(name)];
        expect(cell('READY')).toBe('True');
        expect(cell('LAST ROTATED')).toMatch(/^\d+[smhdy]/);
        expect(cell('NEXT')).toBe('2026-12-01T08:00:00Z');
        expect(cell('SLOT')).toBe('key_billing-api');
      } finally {
        await t.close();
      }
    });
  });
}
