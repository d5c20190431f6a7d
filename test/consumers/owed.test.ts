// Restart debts as claims (issue 27 finding 3, issue 28 item 4): which owed entries count
// (owed.ts), what a pick-up syncs (plan.ts), and a run's report of the restarts it made (report.ts).
import { describe, expect, it } from 'vitest';
import {
  DEPLOYMENT_REVISION,
  RESTART_OWED,
  RESTARTED_FOR,
  type OwedRestart,
} from '../../src/consumers/markers.ts';
import { judgeOwed, type KeyRecord } from '../../src/consumers/owed.ts';
import { planDelivery, policyOrder } from '../../src/consumers/plan.ts';
import { consumerKey } from '../../src/consumers/refs.ts';
import { consumersSummaryPart, runConsumersReport } from '../../src/consumers/report.ts';
import type { DeliveryReport, StoredValue } from '../../src/consumers/types.ts';
import type { KubeObject } from '../../src/consumers/kubernetes/client.ts';
import type { KeyPolicy } from '../../src/policy/schema.ts';
import { keyPolicy } from '../rotation/harness.ts';

const NOW = Date.parse('2026-11-28T12:00:00Z');
const checkout = { kind: 'deployment' as const, namespace: 'shop', name: 'checkout' };
const billing = { kind: 'deployment' as const, namespace: 'shop', name: 'billing' };
const checkoutSecret = { kind: 'externalSecret' as const, namespace: 'shop', name: 'checkout-api-key' };
const billingSecret = { kind: 'externalSecret' as const, namespace: 'shop', name: 'billing-api-key' };
const keyA = keyPolicy('key_a', 'org', { consumers: [checkoutSecret, checkout] });
const keyB = keyPolicy('key_b', 'org', { consumers: [billingSecret, billing] });
const record: KeyRecord = { lastRotationId: 'r-a2', lastRotatedAt: '2026-11-28T11:00:00Z' };

function entry(overrides: Partial<OwedRestart> = {}): OwedRestart {
  return {
    rotationId: 'r-a2',
    keyId: 'key_a',
    urgent: true,
    storedAt: '2026-11-28T11:00:01Z',
    rollout: 4,
    ...overrides,
  };
}

/** A Deployment at deployment-controller revision `revision`; its generation moves with every annotation write, so it is set apart. */
function workload(revision: number, annotations: Record<string, string> = {}): KubeObject {
  return {
    metadata: {
      name: 'checkout',
      namespace: 'shop',
      generation: revision * 10 + 7,
      annotations: { [DEPLOYMENT_REVISION]: String(revision), ...annotations },
    },
  };
}

function judge(
  owed: OwedRestart,
  options: { key?: KeyPolicy; object?: KubeObject; record?: KeyRecord | 'unreadable' } = {},
) {
  return judgeOwed(owed, {
    workload: checkout,
    object: options.object ?? workload(4),
    key: 'key' in options ? options.key : keyA,
    record: options.record ?? record,
    nowMs: NOW,
  });
}

describe('judgeOwed: which restart debts count', () => {
  it("counts an entry of the key's last rotation on a workload it lists, written at the workload's revision", () => {
    expect(judge(entry())).toEqual({ kind: 'owed' });
  });

  it('calls forged an entry naming a key of the policy that does not list the workload', () => {
    expect(
      judge(entry({ keyId: 'key_b', rotationId: 'r-b1' }), { key: keyB, record: { lastRotationId: 'r-b1' } }),
    ).toEqual({ kind: 'forged', why: 'not-a-consumer' });
  });

  it("calls forged an entry stored later than now by more than the policy's clock skew", () => {
    expect(judge(entry({ storedAt: new Date(NOW + keyA.clockSkewMs + 1000).toISOString() }))).toEqual({
      kind: 'forged',
      why: 'future',
    });
    expect(judge(entry({ storedAt: new Date(NOW + keyA.clockSkewMs).toISOString() }))).toEqual({
      kind: 'owed',
    });
  });

  it("calls forged a rotation the key's record does not know, dated at or after its last rotation; one dated before is superseded", () => {
    expect(judge(entry({ rotationId: 'made-up' }))).toEqual({ kind: 'forged', why: 'unknown-rotation' });
    expect(judge(entry({ rotationId: 'r-a1', storedAt: '2026-11-28T10:00:00Z' }))).toEqual({
      kind: 'settle',
      why: 'superseded',
    });
    expect(judge(entry(), { record: {} })).toEqual({ kind: 'forged', why: 'unknown-rotation' });
  });

  it('settles an entry the workload was restarted for already', () => {
    expect(judge(entry(), { object: workload(4, { [RESTARTED_FOR]: 'r-a1,r-a2' }) })).toEqual({
      kind: 'settle',
      why: 'already-restarted',
    });
  });

  it('settles a deferred entry once the pods rolled after it (an undo brought it back); an in-progress one depends on its syncs', () => {
    expect(judge(entry({ deferred: true }), { object: workload(6) })).toEqual({
      kind: 'settle',
      why: 'rolled-since',
    });
    expect(judge(entry(), { object: workload(6) })).toEqual({ kind: 'rolled' });
    expect(judge(entry({ rollout: undefined }), { object: workload(6) })).toEqual({ kind: 'owed' });
    // A Deployment's generation moves with any annotation write (keyroll's own markers too): not a roll.
    expect(
      judge(entry({ deferred: true }), {
        object: { metadata: { generation: 90, annotations: { [DEPLOYMENT_REVISION]: '4' } } },
      }),
    ).toEqual({ kind: 'owed' });
  });

  it("leaves alone an entry of a key outside the policy, and one whose key's record cannot be read now", () => {
    expect(judge(entry({ keyId: 'key_elsewhere' }), { key: undefined })).toEqual({ kind: 'unjudged' });
    expect(judge(entry(), { record: 'unreadable' })).toEqual({ kind: 'unjudged' });
  });
});

describe('planDelivery for owed restarts picked up', () => {
  function value(key: KeyPolicy, rotationId: string): StoredValue {
    return {
      key,
      rotationId,
      storedAtMs: NOW,
      reason: 'scheduled',
      urgency: 'now',
      notice: {
        keyId: key.id,
        organizationId: 'org',
        rotationId,
        rotatedAt: new Date(NOW).toISOString(),
        destinations: [],
        stage: 'finished',
      },
    };
  }

  it('syncs only the ExternalSecrets of values a listed workload is owed', () => {
    const plan = planDelivery(
      [value(keyA, 'r-a2'), value(keyB, 'r-b1')],
      policyOrder([keyA, keyB]),
      new Map([[consumerKey(checkout), new Set(['r-a2'])]]),
    );
    expect(plan.syncs.map((target) => target.consumer.name)).toEqual(['checkout-api-key']);
    expect(plan.restarts.map((target) => [target.consumer.name, target.syncs])).toEqual([
      ['checkout', [consumerKey(checkoutSecret)]],
    ]);
  });
});

describe("a run's consumers report", () => {
  const report = (deliveryId: string, results: DeliveryReport['outcomes']): DeliveryReport => ({
    deliveryId,
    outcomes: results,
    refreshed: results.filter((outcome) => outcome.result === 'refreshed').length,
    failed: results.filter((outcome) => outcome.result === 'failed').length,
    deferred: 0,
    skipped: 0,
  });
  const restart = (result: 'refreshed' | 'failed') => ({
    consumer: checkout,
    result,
    keyIds: ['key_a'],
    rotationIds: ['r-a2'],
  });

  it('counts the restarts a pick-up of owed restarts made, on the summary line and in the failures that set the exit code', () => {
    const combined = runConsumersReport(undefined, report('d-owed', [restart('failed')]));
    expect(combined).toMatchObject({ refreshed: 0, failed: 1, owed: 1, deliveryIds: ['d-owed'] });
    const both = runConsumersReport(
      report('d-run', [restart('refreshed')]),
      report('d-owed', [restart('refreshed')]),
    );
    expect(consumersSummaryPart(both)).toBe('; consumers refreshed 2, failed 0, owed from earlier runs 1');
    expect(runConsumersReport(undefined, undefined)).toBeUndefined();
  });
});

it('keeps the annotation name keyroll writes', () => {
  expect(RESTART_OWED).toBe('keyroll.io/restart-owed');
});
