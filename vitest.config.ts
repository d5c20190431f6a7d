import { defineConfig } from 'vitest/config';

// Three projects: `unit` (no external servers; the emulator and loopback receivers run in-process),
// `integration` (real OpenBao and moto servers started by test/integration/global-setup.ts, and a
// real Kubernetes API server it starts when a test file first asks for one) and
// `faults` (the fault matrix, same servers; see docs/faults.md).
// `npm test` runs all three; under CI=true a server that cannot start fails the run.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          include: ['test/**/*.test.ts'],
          exclude: ['test/integration/**', 'test/faults/**', 'node_modules/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          fileParallelism: false,
        },
      },
      {
        // The fault matrix (issue 6): `npm run test:faults`, with test/faults/reporter.ts.
        extends: true,
        test: {
          name: 'faults',
          include: ['test/faults/**/*.test.ts'],
          globalSetup: ['test/integration/global-setup.ts'],
          fileParallelism: false,
        },
      },
    ],
  },
});
