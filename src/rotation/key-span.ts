// The span of one key in a run (docs/tracing.md): everything the run does for the key, from the
// read of its state to the last alert of its rotation, with the rotation's steps (transaction.ts)
// as its children. It names the key and, when the work is over, what came of it; never a value.
import type { KeyPolicy } from '../policy/public/schema.ts';
import { inSpan } from '../tracing/public/spans.ts';
import type { KeyOutcome, RunTrigger } from './types.ts';

export function inKeySpan(
  runId: string,
  trigger: RunTrigger,
  task: (key: KeyPolicy) => Promise<KeyOutcome>,
): (key: KeyPolicy) => Promise<KeyOutcome> {
  return (key) =>
    inSpan(
      'rotate key',
      {
        'keyroll.key.id': key.id,
        'keyroll.organization.id': key.organizationId,
        'keyroll.run.id': runId,
        'keyroll.reason': trigger.reason,
      },
      async (span) => {
        const outcome = await task(key);
        span.setAttributes({
          'keyroll.result': outcome.result,
          'keyroll.rotation.id': outcome.rotationId,
          'keyroll.rolls': outcome.rolls,
          'keyroll.rolled_key.id': outcome.rolledKeyId,
          'keyroll.step': outcome.step,
          'keyroll.degraded': outcome.degraded,
        });
        if (outcome.result === 'failed') span.fail(outcome.errorCode);
        return outcome;
      },
    );
}
