// The fault matrix against moto (AWS Secrets Manager) behind the fault proxy: API faults,
// backend faults at every backend step (permission denied with moto's IAM enforcement), alert
// sinks down, SIGTERM and SIGKILL. See docs/faults.md.
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startFaultBench, type FaultBench } from './bench.ts';
import { API_CASES, BACKEND_CASES, SIGNAL_CASES, SINK_CASES, caseName, casesFor } from './cases.ts';
import { runInProcessCase } from './run-case.ts';
import { runSignalCase } from './signals.ts';

let bench: FaultBench | undefined;
beforeAll(async () => {
  bench = await startFaultBench('aws');
});
afterAll(async () => {
  await bench?.close();
});

describe('fault matrix: moto', () => {
  for (const spec of casesFor('aws', [...API_CASES, ...BACKEND_CASES, ...SINK_CASES])) {
    it(caseName(spec, 'aws'), async (ctx) => {
      if (!bench) return ctx.skip();
      await runInProcessCase(ctx, bench, spec);
    });
  }
});

describe('fault matrix: moto, signals to keyroll run', () => {
  for (const spec of casesFor('aws', SIGNAL_CASES)) {
    it(caseName(spec, 'aws'), async (ctx) => {
      if (!bench) return ctx.skip();
      await runSignalCase(ctx, bench, spec);
    });
  }
});
