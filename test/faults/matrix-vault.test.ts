// The fault matrix against OpenBao (Vault KV v2) behind the fault proxy: API faults, backend
// faults at every backend step, alert sinks down, SIGTERM and SIGKILL. See docs/faults.md.
import { afterAll, beforeAll, describe, it } from 'vitest';
import { startFaultBench, type FaultBench } from './bench.ts';
import { API_CASES, BACKEND_CASES, SIGNAL_CASES, SINK_CASES, caseName, casesFor } from './cases.ts';
import { runInProcessCase } from './run-case.ts';
import { runSignalCase } from './signals.ts';

let bench: FaultBench | undefined;
beforeAll(async () => {
  bench = await startFaultBench('vault');
});
afterAll(async () => {
  await bench?.close();
});

describe('fault matrix: OpenBao', () => {
  for (const spec of casesFor('vault', [...API_CASES, ...BACKEND_CASES, ...SINK_CASES])) {
    it(caseName(spec, 'vault'), async (ctx) => {
      if (!bench) return ctx.skip();
      await runInProcessCase(ctx, bench, spec);
    });
  }
});

describe('fault matrix: OpenBao, signals to keyroll run', () => {
  for (const spec of casesFor('vault', SIGNAL_CASES)) {
    it(caseName(spec, 'vault'), async (ctx) => {
      if (!bench) return ctx.skip();
      await runSignalCase(ctx, bench, spec);
    });
  }
});
