// A new leader writes every RotatedKey's status, at most `concurrency` objects at once (the key
// stores and the API server share that load), and every object still gets its write.
import { describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../../src/audit/logger.ts';
import { StatusReporter } from '../../../src/crd/controller/reporter.ts';
import type { ObjectRequests } from '../../../src/crd/watch/kube-client.ts';
import type { WatchedObject } from '../../../src/crd/watch/resource.ts';
import { keyWith } from './fixtures.ts';

describe('the status reporter’s writes', () => {
  it('writes every object, never more than `concurrency` at once', async () => {
    const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    const objects = new Map<string, WatchedObject>(
      names.map((name) => [
        `team/${name}`,
        { metadata: { namespace: 'team', name, generation: 1, resourceVersion: '1' } },
      ]),
    );
    let inFlight = 0;
    let most = 0;
    const patched: string[] = [];
    const requests: ObjectRequests = {
      get: (ref) => Promise.resolve(structuredClone(objects.get(`team/${ref.name}`)!)),
      patchStatus: async (ref, patch) => {
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight--;
        patched.push(ref.name);
        const object = objects.get(`team/${ref.name}`)!;
        const status = (patch as { status: Record<string, unknown> }).status;
        return { ...object, metadata: { ...object.metadata, resourceVersion: '2' }, status };
      },
      create: () => Promise.resolve({}),
    };
    const reporter = new StatusReporter({
      requests,
      resource: { group: 'keyroll.io', version: 'v1alpha1', plural: 'rotatedkeys' },
      objects: { get: (key) => objects.get(key) },
      keyPolicy: (keyId) => ({ ...keyWith(), id: keyId }),
      readTrustedState: () => Promise.resolve({ exists: true, lastRotatedAt: '2026-11-01T08:00:00Z' }),
      audit: createMemoryAuditLog(),
      now: () => new Date('2026-11-29T10:00:00Z'),
      concurrency: 3,
    });
    reporter.onGeneration(new Map(names.map((name) => [`team/${name}`, `key_${name}`])), []);
    reporter.onLeadership(true);
    await reporter.idle();
    expect(patched.sort()).toEqual(names);
    expect(most).toBe(3);
    expect(reporter.counts.writes).toBe(names.length);
  });

  it('posts every Event, never more than `eventConcurrency` at once', async () => {
    const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    const objects = new Map<string, WatchedObject>(
      names.map((name) => [
        `team/${name}`,
        { metadata: { namespace: 'team', name, generation: 1, resourceVersion: '1' } },
      ]),
    );
    let inFlight = 0;
    let most = 0;
    const posted: string[] = [];
    const requests: ObjectRequests = {
      get: (ref) => Promise.resolve(structuredClone(objects.get(`team/${ref.name}`)!)),
      patchStatus: (ref, patch) => {
        const object = objects.get(`team/${ref.name}`)!;
        const status = (patch as { status: Record<string, unknown> }).status;
        return Promise.resolve({ ...object, metadata: { ...object.metadata, resourceVersion: '2' }, status });
      },
      create: async (_resource, _namespace, body) => {
        inFlight++;
        most = Math.max(most, inFlight);
        await new Promise((resolve) => setImmediate(resolve));
        inFlight--;
        posted.push((body as { involvedObject: { name: string } }).involvedObject.name);
        return {};
      },
    };
    const reporter = new StatusReporter({
      requests,
      resource: { group: 'keyroll.io', version: 'v1alpha1', plural: 'rotatedkeys' },
      objects: { get: (key) => objects.get(key) },
      keyPolicy: (keyId) => ({ ...keyWith(), id: keyId }),
      readTrustedState: () => Promise.resolve({ exists: true }),
      audit: createMemoryAuditLog(),
      now: () => new Date('2026-11-29T10:00:00Z'),
      eventConcurrency: 2,
    });
    reporter.onLeadership(true);
    // Every object refused at once: one Refused Event each.
    reporter.onGeneration(
      new Map(),
      names.map((name) => ({
        object: { kind: 'RotatedKey', namespace: 'team', name },
        reason: 'PathOutsidePrefix',
        message: 'the path is not under teams/team/',
      })),
    );
    await reporter.idle();
    expect(posted.sort()).toEqual(names);
    expect(most).toBe(2);
    expect(reporter.counts.events).toBe(names.length);
  });
});
