// The consumers' refresh as spans (docs/tracing.md, issue 23 §4): one `consumer refresh` span per
// delivery (a run's, or a pick-up of owed restarts), and beneath it one span per consumer told:
// `webhook notice`, `externalSecret sync`, `workload restart` (the patch and the wait for its
// rollout). They name the consumer (kind, namespace and name, or the sink's name in the policy),
// the keys and rotations, and the outcome with its stable error code; never a value or an error
// message (invariant 3: a message may echo what a server answered).
import type { ConsumerRef } from '../policy/public/consumers.ts';
import {
  inSpan,
  spanClock,
  startStep,
  type SpanAttributes,
  type TraceSpan,
} from '../tracing/public/spans.ts';
import type { ConsumerOutcome, ConsumerResult, DeliveryReport } from './types.ts';

/** Webhook notices of one stored value, with when they began and ended on the spans' clock. */
export interface TimedNotices {
  startMs: number;
  endMs: number;
  outcomes: ConsumerOutcome[];
}

/** Times the notices as they go out; the spans are made later, inside the delivery's span. */
export async function timeNotices(
  notices: Promise<ConsumerOutcome[]>,
  startMs = spanClock(),
): Promise<TimedNotices> {
  const outcomes = await notices;
  return { startMs, endMs: spanClock(), outcomes };
}

export function consumerAttributes(consumer: ConsumerRef): SpanAttributes {
  return consumer.kind === 'webhook'
    ? { 'keyroll.consumer.kind': 'webhook', 'keyroll.consumer.sink': consumer.sink }
    : {
        'keyroll.consumer.kind': consumer.kind,
        'keyroll.consumer.namespace': consumer.namespace,
        'keyroll.consumer.name': consumer.name,
      };
}

function markOutcome(span: TraceSpan, result: ConsumerResult, errorCode: string | undefined): void {
  span.setAttributes({ 'keyroll.consumer.result': result });
  if (result === 'failed') span.fail(errorCode ?? 'KR_CONSUMER_FAILED');
}

/**
 * The span of one delivery. It begins at `startMs` when webhook notices went out before it (as
 * their keys ended) and ends with the counts of the report; failed when a consumer failed.
 */
export function inRefreshSpan(
  what: {
    source: 'run' | 'owed';
    deliveryId: string;
    keyIds: readonly string[];
    rotationIds: readonly string[];
  },
  work: () => Promise<DeliveryReport | undefined>,
  startMs?: number,
): Promise<DeliveryReport | undefined> {
  const attributes = {
    'keyroll.delivery.id': what.deliveryId,
    'keyroll.consumers.source': what.source,
    'keyroll.key.ids': what.keyIds,
    'keyroll.rotation.ids': what.rotationIds,
  };
  return inSpan(
    'consumer refresh',
    attributes,
    async (span) => {
      const report = await work();
      if (report === undefined) return report;
      span.setAttributes({
        'keyroll.consumers.refreshed': report.refreshed,
        'keyroll.consumers.failed': report.failed,
        'keyroll.consumers.deferred': report.deferred,
        'keyroll.consumers.skipped': report.skipped,
      });
      const failed = report.outcomes.find((outcome) => outcome.result === 'failed');
      if (failed !== undefined) span.fail(failed.errorCode ?? 'KR_CONSUMER_FAILED');
      return report;
    },
    'active',
    startMs,
  );
}

/** The webhook notices, as children of the delivery's span (call inside inRefreshSpan), at the times they took. */
export function traceNotices(notices: readonly TimedNotices[]): void {
  for (const { startMs, endMs, outcomes } of notices) {
    for (const outcome of outcomes) {
      const span = startStep(
        'webhook notice',
        {
          ...consumerAttributes(outcome.consumer),
          'keyroll.key.ids': outcome.keyIds,
          'keyroll.rotation.ids': outcome.rotationIds,
        },
        startMs,
      );
      markOutcome(span, outcome.result, outcome.errorCode);
      span.end(endMs);
    }
  }
}

/** The span of one consumer's sync or restart, with its outcome. */
export function inConsumerSpan<T>(
  name: 'externalSecret sync' | 'vaultStaticSecret sync' | 'workload restart',
  consumer: ConsumerRef,
  rotationIds: readonly string[],
  work: () => Promise<T>,
  outcomeOf: (value: T) => { result: ConsumerResult; errorCode?: string | undefined },
): Promise<T> {
  return inSpan(
    name,
    { ...consumerAttributes(consumer), 'keyroll.rotation.ids': rotationIds },
    async (span) => {
      const value = await work();
      const { result, errorCode } = outcomeOf(value);
      markOutcome(span, result, errorCode);
      return value;
    },
  );
}
