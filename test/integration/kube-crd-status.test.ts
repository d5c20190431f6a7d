// The status writer and the Event recorder of src/crd/status/ on the real kube-apiserver, on a
// test-only Widget CRD with a status subresource: two equal desired states write once; a condition
// keeps its lastTransitionTime until its status flips; a writer that read a stale object meets the
// API server's 409, reads again, recomputes and lands without losing the other writer's fields; a
// conflict on every attempt gives up (bounded); an object deleted meanwhile is left alone; an
// Event's message never carries a secret.
import { randomBytes } from 'node:crypto';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { registerSecretValue, resetSanitizerForTests } from '../../src/audit/sanitize.ts';
import {
  findCondition,
  mergeConditions,
  type Condition,
  type DesiredCondition,
} from '../../src/crd/status/conditions.ts';
import { recordEvent } from '../../src/crd/status/events.ts';
import { writeStatus, type JsonObject } from '../../src/crd/status/status-writer.ts';
import { CrdError } from '../../src/crd/watch/errors.ts';
import { KubeResourceClient, type ObjectRequests } from '../../src/crd/watch/kube-client.ts';
import type { ObjectRef, WatchedObject } from '../../src/crd/watch/resource.ts';
import { adminKubeConfig } from '../support/kube-apiserver.ts';
import { expectNoSecrets } from '../support/secret-scan.ts';
import { useWidgets } from './kube-crd-support.ts';
import { kubeApiServer } from './servers.ts';

const server = await kubeApiServer();
const T0 = new Date('2026-11-29T08:00:00Z');
const T1 = new Date('2026-11-29T09:00:00Z');
const T2 = new Date('2026-11-29T10:00:00Z');

/** The status a controller computes from the object as read: Ready as given, at clock `now`. */
function readyStatus(ready: DesiredCondition, now: Date): (object: WatchedObject) => JsonObject {
  return (object) => {
    const generation = object.metadata?.generation ?? 0;
    const stored = (object.status as { conditions?: Condition[] } | undefined)?.conditions;
    return {
      ...(object.status as JsonObject | undefined),
      observedGeneration: generation,
      conditions: mergeConditions(stored, [ready], generation, now) as unknown as JsonObject[],
    };
  };
}

const READY: DesiredCondition = { type: 'Ready', status: 'True', reason: 'Rotated', message: 'rotated' };
const NOT_READY: DesiredCondition = {
  type: 'Ready',
  status: 'False',
  reason: 'RotationFailed',
  message: 'the roll failed',
};

const conditionsOf = (object: WatchedObject): Condition[] =>
  (object.status as { conditions?: Condition[] } | undefined)?.conditions ?? [];

if (server === undefined) {
  describe.skip('the keyroll.io status writer (the Kubernetes API server is not available; see the global setup message)', () => {
    it('needs kube-apiserver and etcd', () => undefined);
  });
} else {
  const kube = server;
  const requests = new KubeResourceClient(adminKubeConfig(kube));
  const signal = AbortSignal.timeout(60_000);

  async function widget(): Promise<{ ref: ObjectRef; read: () => Promise<WatchedObject> }> {
    const widgets = await useWidgets(kube);
    await widgets.create('w', { size: 1 });
    const ref: ObjectRef = { resource: widgets.resource, name: 'w' };
    return { ref, read: () => requests.get(ref, signal) };
  }

  afterEach(() => {
    resetSanitizerForTests();
  });

  describe('the keyroll.io status writer (kube-apiserver)', () => {
    it('writes once for two equal desired states, and keeps lastTransitionTime until the status flips', async () => {
      const { ref, read } = await widget();
      const first = await writeStatus({ requests, ref, desired: readyStatus(READY, T0), signal });
      expect(first).toMatchObject({ outcome: 'written', attempts: 1 });
      const afterFirst = await read();
      // keyroll names itself as the status's field manager, so managedFields tells its writes apart.
      const { managedFields } = afterFirst.metadata as { managedFields?: unknown[] };
      expect(managedFields).toContainEqual(
        expect.objectContaining({ manager: 'keyroll', subresource: 'status', operation: 'Update' }),
      );

      // The same facts an hour later: nothing to write, the object is not touched.
      expect(
        await writeStatus({ requests, ref, current: afterFirst, desired: readyStatus(READY, T1), signal }),
      ).toEqual({ outcome: 'unchanged' });
      expect((await read()).metadata?.resourceVersion).toBe(afterFirst.metadata?.resourceVersion);

      // A new message, same status: written, and the transition time stays T0.
      const reworded = { ...READY, message: 'rotated again' };
      expect(await writeStatus({ requests, ref, desired: readyStatus(reworded, T1), signal })).toMatchObject({
        outcome: 'written',
      });
      expect(findCondition(conditionsOf(await read()), 'Ready')).toEqual({
        ...reworded,
        lastTransitionTime: '2026-11-29T08:00:00Z',
        observedGeneration: 1,
      });

      // The status flips: the transition time moves.
      await writeStatus({ requests, ref, desired: readyStatus(NOT_READY, T2), signal });
      expect(findCondition(conditionsOf(await read()), 'Ready')).toMatchObject({
        status: 'False',
        lastTransitionTime: '2026-11-29T10:00:00Z',
      });
    });

    it('a stale read meets 409: the writer reads again, recomputes, and keeps what the other writer wrote', async () => {
      const { ref, read } = await widget();
      const stale = await read();
      // Another writer (a second replica that still believed it led) writes the status first.
      await requests.patchStatus(
        ref,
        {
          status: {
            failedAttempts: 3,
            conditions: [{ ...NOT_READY, type: 'Drifted', lastTransitionTime: '2026-11-29T07:00:00Z' }],
          },
        },
        signal,
      );
      const result = await writeStatus({
        requests,
        ref,
        current: stale,
        desired: readyStatus(READY, T0),
        signal,
      });
      expect(result).toMatchObject({ outcome: 'written', attempts: 2 });
      const stored = await read();
      expect(stored.status).toMatchObject({ failedAttempts: 3, observedGeneration: 1 });
      expect(conditionsOf(stored).map((condition) => condition.type)).toEqual(['Drifted', 'Ready']);
    });

    it('gives up after a bounded number of conflicts (KR_CRD_CONFLICT)', async () => {
      const { ref } = await widget();
      let competing = 0;
      // A competitor that writes between each of our reads and our patch: every patch meets 409.
      const contended: ObjectRequests = {
        get: async (target, abort) => {
          const object = await requests.get(target, abort);
          competing++;
          await requests.patchStatus(target, { status: { competing } }, abort);
          return object;
        },
        patchStatus: (target, patch, abort) => requests.patchStatus(target, patch, abort),
        create: (resource, namespace, body, abort) => requests.create(resource, namespace, body, abort),
      };
      const failure = await writeStatus({
        requests: contended,
        ref,
        desired: readyStatus(READY, T0),
        signal,
        maxAttempts: 3,
      }).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(CrdError);
      expect(failure).toMatchObject({ code: 'KR_CRD_CONFLICT', status: 409 });
      expect(competing).toBe(3);
    });

    it('an object deleted since it was read is gone: nothing written, no error', async () => {
      const widgets = await useWidgets(kube);
      await widgets.create('w', { size: 1 });
      const ref: ObjectRef = { resource: widgets.resource, name: 'w' };
      const stale = await requests.get(ref, signal);
      await widgets.remove('w');
      expect(
        await writeStatus({ requests, ref, current: stale, desired: readyStatus(READY, T0), signal }),
      ).toEqual({ outcome: 'gone' });
      expect(await writeStatus({ requests, ref, desired: readyStatus(READY, T0), signal })).toEqual({
        outcome: 'gone',
      });
    });

    it('records a core/v1 Event on the object; a secret in the message is blanked', async () => {
      const widgets = await useWidgets(kube);
      await widgets.create('w', { size: 1 });
      const object = await requests.get({ resource: widgets.resource, name: 'w' }, signal);
      const secret = `sk_live_${randomBytes(24).toString('hex')}`;
      registerSecretValue(secret);
      await recordEvent(
        requests,
        {
          involved: {
            apiVersion: `${widgets.group}/v1`,
            kind: 'Widget',
            namespace: widgets.namespace,
            name: 'w',
            uid: object.metadata?.uid ?? '',
          },
          type: 'Warning',
          reason: 'RotationFailed',
          message: `the store refused the write of ${secret} (403)`,
        },
        signal,
      );
      const events = await adminKubeConfig(kube)
        .makeApiClient(CoreV1Api)
        .listNamespacedEvent({ namespace: widgets.namespace });
      expect(events.items).toHaveLength(1);
      const [event] = events.items;
      expect(event).toMatchObject({
        type: 'Warning',
        reason: 'RotationFailed',
        involvedObject: { kind: 'Widget', name: 'w', uid: object.metadata?.uid },
        source: { component: 'keyroll' },
      });
      expect(event?.message).toContain('the store refused the write of');
      expectNoSecrets([JSON.stringify(events.items)], [secret], 'the Events of the namespace');
    });
  });
}
