// The fault matrix against a file directory: API faults, alert sinks down, SIGTERM and SIGKILL
// (a directory has no network to break; backend faults run against OpenBao and moto). See
// docs/faults.md.
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startFaultBench, type FaultBench } from './bench.ts';
import { API_CASES, SIGNAL_CASES, SINK_CASES, caseName, casesFor } from './cases.ts';
import { runInProcessCase } from './run-case.ts';
import { runSignalCase } from './signals.ts';

let bench: FaultBench | undefined;
beforeAll(async () => {
  bench = await startFaultBench('file');
});
afterAll(async () => {
  await bench?.close();
});

describe('fault matrix: file', () => {
  for (const spec of casesFor('file', [...API_CASES, ...SINK_CASES])) {
    it(caseName(spec, 'file'), async (ctx) => {
      if (!bench) return ctx.skip();
      await runInProcessCase(ctx, bench, spec);
    });
  }
});

describe('fault matrix: file, signals to keyroll run', () => {
  for (const spec of casesFor('file', SIGNAL_CASES)) {
    it(caseName(spec, 'file'), async (ctx) => {
      if (!bench) return ctx.skip();
      await runSignalCase(ctx, bench, spec);
    });
  }
});
