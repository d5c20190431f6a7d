// The reporter (src/crd/controller/reporter.ts) over an in-memory stand-in of the API server that
// applies status merge patches with the resourceVersion check: leader only, one write per change,
// coalesced writes, a refusal, and a rotate-now served once. The real API server runs the same
// cases in test/integration/kube-crd-controller.test.ts.
import { describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../../src/audit/logger.ts';
import type { KeyState } from '../../../src/backends/types.ts';
import type { AnnotationRequests } from '../../../src/crd/controller/annotation-client.ts';
import { StatusReporter } from '../../../src/crd/controller/reporter.ts';
import type { RotateNowCall } from '../../../src/crd/controller/rotate-now.ts';
import { findCondition, type Condition } from '../../../src/crd/status/conditions.ts';
import { CrdError } from '../../../src/crd/watch/errors.ts';
import type { ObjectRequests } from '../../../src/crd/watch/kube-client.ts';
import type { WatchedObject, WatchedResource } from '../../../src/crd/watch/resource.ts';
import { keyWith, rotated } from './fixtures.ts';

const RESOURCE: WatchedResource = { group: 'keyroll.io', version: 'v1alpha1', plural: 'rotatedkeys' };
const NOW = new Date('2026-11-29T10:00:00Z');

/** Objects by `namespace/name`; status patches checked against resourceVersion as the API server does. */
function standIn(names: string[]) {
  let version = 1;
  const objects = new Map<string, WatchedObject>();
  for (const name of names)
    objects.set(`team/${name}`, {
      metadata: {
        namespace: 'team',
        name,
        uid: `uid-${name}`,
        generation: 1,
        resourceVersion: String(version++),
      },
    });
  const sent = { patches: 0, events: [] as { reason: string; name: string }[] };
  const requests: ObjectRequests = {
    get: (ref) => {
      const object = objects.get(`${ref.namespace ?? ''}/${ref.name}`);
      if (object === undefined)
        return Promise.reject(new CrdError('KR_CRD_NOT_FOUND', 'gone', { where: 'get', status: 404 }));
      return Promise.resolve(structuredClone(object));
    },
    patchStatus: (ref, patch) => {
      sent.patches++;
      const key = `${ref.namespace ?? ''}/${ref.name}`;
      const object = objects.get(key);
      const body = patch as { metadata?: { resourceVersion?: string }; status: Record<string, unknown> };
      if (object === undefined)
        return Promise.reject(new CrdError('KR_CRD_NOT_FOUND', 'gone', { where: 'patch', status: 404 }));
      if (body.metadata?.resourceVersion !== object.metadata?.resourceVersion)
        return Promise.reject(new CrdError('KR_CRD_CONFLICT', 'conflict', { where: 'patch', status: 409 }));
      const merged = { ...(object.status as Record<string, unknown> | undefined), ...body.status };
      const status = Object.fromEntries(Object.entries(merged).filter(([, value]) => value !== null));
      const next = {
        ...object,
        metadata: { ...object.metadata, resourceVersion: String(version++) },
        status,
      };
      objects.set(key, next);
      return Promise.resolve(structuredClone(next));
    },
    create: (_resource, _namespace, body) => {
      const event = body as { reason: string; involvedObject: { name: string } };
      sent.events.push({ reason: event.reason, name: event.involvedObject.name });
      return Promise.resolve({});
    },
  };
  const annotate = (name: string, value: string | undefined): void => {
    const key = `team/${name}`;
    const object = objects.get(key)!;
    const annotations: Record<string, string> = value === undefined ? {} : { 'keyroll.io/rotate-now': value };
    objects.set(key, {
      ...object,
      metadata: { ...object.metadata, annotations, resourceVersion: String(version++) },
    });
  };
  return { objects, requests, sent, annotate };
}

function reporterOn(stand: ReturnType<typeof standIn>, calls: RotateNowCall[] = []) {
  const state: KeyState = { exists: true, lastRotatedAt: '2026-11-01T08:00:00Z', lastRotationId: 'rot_1' };
  const removed: string[] = [];
  const annotations: AnnotationRequests = {
    removeAnnotation: (ref, _name, value) => {
      removed.push(value);
      stand.annotate(ref.name, undefined);
      return Promise.resolve('removed');
    },
  };
  const reporter: StatusReporter = new StatusReporter({
    requests: stand.requests,
    resource: RESOURCE,
    objects: { get: (key) => stand.objects.get(key) },
    keyPolicy: (keyId) => ({ ...keyWith(), id: keyId }),
    readTrustedState: () => Promise.resolve(state),
    audit: createMemoryAuditLog(),
    now: () => NOW,
    rotateNow: {
      annotations,
      port: (keyId, call) => {
        calls.push(call);
        const outcome = rotated({ keyId, reason: call.reason });
        reporter.onKeyOutcome(keyId, outcome);
        return Promise.resolve(outcome);
      },
    },
  });
  return { reporter, removed, state };
}

const ready = (object: WatchedObject | undefined): Condition | undefined =>
  findCondition((object?.status as { conditions?: Condition[] } | undefined)?.conditions, 'Ready');

describe('the status reporter', () => {
  it('sends nothing while not leading, then writes each status once when it leads', async () => {
    const stand = standIn(['a', 'b']);
    const { reporter } = reporterOn(stand);
    reporter.onGeneration(
      new Map([
        ['team/a', 'key_a'],
        ['team/b', 'key_b'],
      ]),
      [],
    );
    reporter.onKeyOutcome('key_a', rotated({ keyId: 'key_a' }));
    await reporter.idle();
    expect(stand.sent).toEqual({ patches: 0, events: [] });

    reporter.onLeadership(true);
    await reporter.idle();
    expect(stand.sent.patches).toBe(2);
    expect(ready(stand.objects.get('team/a'))).toMatchObject({ status: 'True', reason: 'Rotated' });

    // The same facts again: nothing sent.
    reporter.onGeneration(
      new Map([
        ['team/a', 'key_a'],
        ['team/b', 'key_b'],
      ]),
      [],
    );
    await reporter.idle();
    expect(stand.sent.patches).toBe(2);
  });

  it('outcomes arriving while a write is in flight make one more write, not one each', async () => {
    const stand = standIn(['a']);
    const { reporter } = reporterOn(stand);
    reporter.onLeadership(true);
    reporter.onGeneration(new Map([['team/a', 'key_a']]), []);
    await reporter.idle();
    const before = stand.sent.patches;
    for (let i = 0; i < 5; i++)
      reporter.onKeyOutcome('key_a', rotated({ keyId: 'key_a', rotationId: `rot_${String(i)}` }));
    await reporter.idle();
    expect(stand.sent.patches - before).toBe(1);
    expect(stand.objects.get('team/a')?.status).toMatchObject({ lastRotationId: 'rot_4' });
    expect(stand.sent.events.filter((event) => event.reason === 'Rotated')).toHaveLength(5);
  });

  it('a drifted key a run found not due is read again: a probe that found the stored secret working clears Drifted', async () => {
    const stand = standIn(['a']);
    const { reporter, state } = reporterOn(stand);
    const drifted = (): Condition | undefined =>
      findCondition(
        (stand.objects.get('team/a')?.status as { conditions?: Condition[] } | undefined)?.conditions,
        'Drifted',
      );
    state.lastProbe = { at: '2026-11-29T09:00:00Z', result: 'dead' };
    reporter.onLeadership(true);
    reporter.onGeneration(new Map([['team/a', 'key_a']]), []);
    await reporter.idle();
    expect(drifted()).toMatchObject({ status: 'True', reason: 'StoredSecretDead' });

    // The next drift probe finds the secret put back by hand working; its run is a not-due skip.
    state.lastProbe = { at: '2026-11-29T09:30:00Z', result: 'works' };
    reporter.onKeyOutcome('key_a', {
      keyId: 'key_a',
      organizationId: 'org_billing',
      durationMs: 5,
      rolls: 0,
      result: 'skipped',
      detail: 'not-due',
    });
    await reporter.idle();
    expect(drifted()).toMatchObject({ status: 'False', reason: 'NoDrift' });
    expect(ready(stand.objects.get('team/a'))).toMatchObject({ status: 'True', reason: 'Rotated' });
  });

  it('a refused object is Ready=False with the reason, told once by an Event', async () => {
    const stand = standIn(['evil']);
    const { reporter } = reporterOn(stand);
    reporter.onLeadership(true);
    const refusal = {
      object: { kind: 'RotatedKey', namespace: 'team', name: 'evil' },
      reason: 'PathOutsidePrefix',
      message: 'the path is not under teams/team/',
    };
    reporter.onGeneration(new Map(), [refusal]);
    reporter.onGeneration(new Map(), [refusal]);
    await reporter.idle();
    expect(ready(stand.objects.get('team/evil'))).toMatchObject({
      status: 'False',
      reason: 'PathOutsidePrefix',
    });
    expect(stand.sent.events).toEqual([{ reason: 'Refused', name: 'evil' }]);
    expect(stand.sent.patches).toBe(1);
  });

  it('serves a rotate-now once: one write with its outcome, the annotation removed, not again after', async () => {
    const stand = standIn(['a']);
    const calls: RotateNowCall[] = [];
    const { reporter, removed } = reporterOn(stand, calls);
    const keys = new Map([['team/a', 'key_a']]);
    reporter.onLeadership(true);
    reporter.onGeneration(keys, []);
    await reporter.idle();
    const before = stand.sent.patches;
    stand.annotate('a', 'leak: INC-7');
    reporter.onObjectChange({
      type: 'modified',
      key: 'team/a',
      object: stand.objects.get('team/a')!,
      previous: {},
    });
    await reporter.idle();
    expect(calls).toEqual([{ reason: 'leak', text: 'INC-7', object: 'team/a' }]);
    expect(stand.sent.patches - before).toBe(1);
    expect(stand.objects.get('team/a')?.status).toMatchObject({
      rotateNow: { value: 'leak: INC-7', settledAt: '2026-11-29T10:00:00Z', outcome: 'Rotated' },
    });
    expect(removed).toEqual(['leak: INC-7']);

    // The watch then shows the copy the settle's status write made, the annotation still on (the
    // removal came after it): no second removal, no second rotation.
    const change = (): void => {
      reporter.onObjectChange({
        type: 'modified',
        key: 'team/a',
        object: stand.objects.get('team/a')!,
        previous: {},
      });
    };
    stand.annotate('a', 'leak: INC-7');
    change();
    await reporter.idle();
    expect(removed).toEqual(['leak: INC-7']);
    // Then the removal itself; a person setting the same value again later has it removed, not served.
    stand.annotate('a', undefined);
    change();
    stand.annotate('a', 'leak: INC-7');
    change();
    await reporter.idle();
    expect(removed).toEqual(['leak: INC-7', 'leak: INC-7']);
    expect(calls).toHaveLength(1);

    // The same value again, seen by a new leader with nothing in memory: settled, not rotated.
    stand.annotate('a', 'leak: INC-7');
    const next = reporterOn(stand, calls);
    next.reporter.onGeneration(keys, []);
    next.reporter.onLeadership(true);
    await next.reporter.idle();
    expect(calls).toHaveLength(1);
    expect(next.removed).toEqual(['leak: INC-7']);
  });

  it('a value with an unknown reason is settled as InvalidRequest without a rotation', async () => {
    const stand = standIn(['a']);
    const calls: RotateNowCall[] = [];
    const { reporter } = reporterOn(stand, calls);
    stand.annotate('a', 'please');
    reporter.onGeneration(new Map([['team/a', 'key_a']]), []);
    reporter.onLeadership(true);
    await reporter.idle();
    expect(calls).toEqual([]);
    expect(stand.objects.get('team/a')?.status).toMatchObject({
      rotateNow: { value: 'please', outcome: 'InvalidRequest' },
    });
  });
});
