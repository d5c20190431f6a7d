// A new leader writes every RotatedKey's status, at most `concurrency` objects at once (the key
// stores and the API server share that load), and every object still gets its write; its Events
// are posted at most `eventConcurrency` at once, apart from the writes.
import { describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../../src/audit/logger.ts';
import { StatusReporter, type StatusReporterOptions } from '../../../src/crd/controller/reporter.ts';
import type { ObjectRequests } from '../../../src/crd/watch/kube-client.ts';
import type { WatchedObject } from '../../../src/crd/watch/resource.ts';
import { keyWith } from './fixtures.ts';

const NAMES = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];

/** The team's RotatedKeys, one per name, each with no status yet. */
function objectsNamed(): Map<string, WatchedObject> {
  return new Map(
    NAMES.map((name) => [
      `team/${name}`,
      { metadata: { namespace: 'team', name, generation: 1, resourceVersion: '1' } },
    ]),
  );
}

/** Counts calls in flight; `most` is the highest count seen. Each call yields once before it ends. */
function inFlightGauge() {
  let inFlight = 0;
  const gauge = {
    most: 0,
    async through(): Promise<void> {
      inFlight++;
      gauge.most = Math.max(gauge.most, inFlight);
      await new Promise((resolve) => setImmediate(resolve));
      inFlight--;
    },
  };
  return gauge;
}

/** The API server's answer to a status patch: the object at a new version with that status. */
function patchedObject(object: WatchedObject, patch: object): WatchedObject {
  const status = (patch as { status: Record<string, unknown> }).status;
  return { ...object, metadata: { ...object.metadata, resourceVersion: '2' }, status };
}

function reporterOn(
  objects: Map<string, WatchedObject>,
  requests: Omit<ObjectRequests, 'get'>,
  extra: Partial<StatusReporterOptions>,
): StatusReporter {
  return new StatusReporter({
    requests: {
      ...requests,
      get: (ref) => Promise.resolve(structuredClone(objects.get(`team/${ref.name}`)!)),
    },
    resource: { group: 'keyroll.io', version: 'v1alpha1', plural: 'rotatedkeys' },
    objects: { get: (key) => objects.get(key) },
    keyPolicy: (keyId) => ({ ...keyWith(), id: keyId }),
    readTrustedState: () => Promise.resolve({ exists: true, lastRotatedAt: '2026-11-01T08:00:00Z' }),
    audit: createMemoryAuditLog(),
    now: () => new Date('2026-11-29T10:00:00Z'),
    ...extra,
  });
}

describe('the status reporter’s writes', () => {
  it('writes every object, never more than `concurrency` at once', async () => {
    const objects = objectsNamed();
    const gauge = inFlightGauge();
    const patched: string[] = [];
    const reporter = reporterOn(
      objects,
      {
        patchStatus: async (ref, patch) => {
          await gauge.through();
          patched.push(ref.name);
          return patchedObject(objects.get(`team/${ref.name}`)!, patch);
        },
        create: () => Promise.resolve({}),
      },
      { concurrency: 3 },
    );
    reporter.onGeneration(new Map(NAMES.map((name) => [`team/${name}`, `key_${name}`])), []);
    reporter.onLeadership(true);
    await reporter.idle();
    expect(patched.sort()).toEqual(NAMES);
    expect(gauge.most).toBe(3);
    expect(reporter.counts.writes).toBe(NAMES.length);
  });

  it('posts every Event, never more than `eventConcurrency` at once', async () => {
    const objects = objectsNamed();
    const gauge = inFlightGauge();
    const posted: string[] = [];
    const reporter = reporterOn(
      objects,
      {
        patchStatus: (ref, patch) => Promise.resolve(patchedObject(objects.get(`team/${ref.name}`)!, patch)),
        create: async (_resource, _namespace, body) => {
          await gauge.through();
          posted.push((body as { involvedObject: { name: string } }).involvedObject.name);
          return {};
        },
      },
      { eventConcurrency: 2 },
    );
    reporter.onLeadership(true);
    // Every object refused at once: one Refused Event each.
    reporter.onGeneration(
      new Map(),
      NAMES.map((name) => ({
        object: { kind: 'RotatedKey', namespace: 'team', name },
        reason: 'PathOutsidePrefix',
        message: 'the path is not under teams/team/',
      })),
    );
    await reporter.idle();
    expect(posted.sort()).toEqual(NAMES);
    expect(gauge.most).toBe(2);
    expect(reporter.counts.events).toBe(NAMES.length);
  });
});
