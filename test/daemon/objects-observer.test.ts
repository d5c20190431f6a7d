// What the daemon tells the status writer of a run's consumer delivery (issue 31: the
// ConsumersRefreshed condition): the delivery's outcomes counted per key, a consumer shared by two
// keys counting for both, and an observer that throws reported, never passed on.
import { describe, expect, it } from 'vitest';
import { createMemoryAuditLog } from '../../src/audit/logger.ts';
import type { DeliveryReport } from '../../src/consumers/types.ts';
import { consumersByKey, observerCalls, type ObjectsObserver } from '../../src/daemon/objects-observer.ts';

const deployment = (name: string) => ({ kind: 'deployment' as const, namespace: 'billing', name });

const report: DeliveryReport = {
  deliveryId: 'd-1',
  refreshed: 2,
  failed: 1,
  deferred: 0,
  skipped: 0,
  outcomes: [
    { consumer: deployment('api'), result: 'refreshed', keyIds: ['key_a'], rotationIds: ['r-a'] },
    {
      consumer: deployment('worker'),
      result: 'failed',
      keyIds: ['key_a', 'key_b'],
      rotationIds: ['r-a', 'r-b'],
    },
    { consumer: deployment('cron'), result: 'refreshed', keyIds: ['key_b'], rotationIds: ['r-b'] },
  ],
};

function recording(): { observer: ObjectsObserver; told: [string, unknown][] } {
  const told: [string, unknown][] = [];
  return {
    told,
    observer: {
      onGeneration: () => undefined,
      onKeyOutcome: () => undefined,
      onLeadership: () => undefined,
      onConsumers: (keyId, counts) => {
        told.push([keyId, counts]);
      },
    },
  };
}

describe('the consumer delivery told to the objects observer', () => {
  it('counts each outcome for every key it served', () => {
    expect(Object.fromEntries(consumersByKey(report))).toEqual({
      key_a: { refreshed: 1, failed: 1, deferred: 0, skipped: 0 },
      key_b: { refreshed: 1, failed: 1, deferred: 0, skipped: 0 },
    });
  });

  it('tells each key once per delivery, nothing for a delivery with nothing to deliver', () => {
    const { observer, told } = recording();
    const calls = observerCalls(createMemoryAuditLog(), observer);
    calls.consumers(undefined);
    expect(told).toEqual([]);
    calls.consumers(report);
    expect(told.map(([keyId]) => keyId)).toEqual(['key_a', 'key_b']);
  });

  it('reports an observer that throws as daemon.failed and goes on', () => {
    const audit = createMemoryAuditLog();
    const calls = observerCalls(audit, {
      ...recording().observer,
      onConsumers: () => {
        throw new Error('status writer bug');
      },
    });
    expect(() => {
      calls.consumers(report);
    }).not.toThrow();
    expect(audit.eventsNamed('daemon.failed')).toMatchObject([{ what: 'objects-observer' }]);
  });
});
