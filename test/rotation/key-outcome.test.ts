// A key's outcome is a discriminated union (issue 29 §2): a skip names a SkipReason, a failure a step
// and a code from the catalogue, and a run reports every key once through onKeyDone.
import { afterEach, describe, expect, expectTypeOf, it } from 'vitest';
import type { ErrorCode } from '../../src/error-codes.ts';
import { runRotations } from '../../src/rotation/run.ts';
import type { KeyOutcome, SkipReason } from '../../src/rotation/types.ts';
import { startBench, wrapBackend, type Bench } from './harness.ts';

let bench: Bench | undefined;
afterEach(async () => {
  await bench?.close();
  bench = undefined;
});

describe('a key outcome', () => {
  it('is typed by its result: a skip names a SkipReason, a failure a step and a catalogue code', () => {
    expectTypeOf<Extract<KeyOutcome, { result: 'skipped' }>['detail']>().toEqualTypeOf<SkipReason>();
    expectTypeOf<KeyOutcome['errorCode']>().toEqualTypeOf<ErrorCode | undefined>();
    expectTypeOf<
      Extract<KeyOutcome, { result: 'failed'; step: string }>['errorCode']
    >().toEqualTypeOf<ErrorCode>();
  });

  it('a state that cannot be read for a foreign reason fails at preflight with a catalogue code, reported once', async () => {
    bench = await startBench();
    const foreign = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const heard: KeyOutcome[] = [];
    const runtime = await bench.runtime({
      wrapBackend: (name, backend) =>
        name === 'files' ? wrapBackend(backend, { readState: () => Promise.reject(foreign) }) : backend,
    });
    const summary = await runRotations(runtime, {
      keys: [bench.key('key_demo_billing')],
      trigger: { reason: 'scheduled', force: false },
      onKeyDone: (outcome) => heard.push(outcome),
    });
    await runtime.close();
    expect(summary.outcomes[0]).toMatchObject({
      result: 'failed',
      step: 'preflight',
      errorCode: 'KR_UNEXPECTED',
    });
    expect(heard).toEqual(summary.outcomes);
    // The audit trail and the alert keep the error's own code: operators see what the backend said.
    expect(bench.events().find((event) => event.event === 'key.failed')).toMatchObject({
      errorCode: 'ECONNRESET',
    });
  });
});
