// The prologue of the tests that rotate against the API emulator in process: one emulator on a
// free loopback port for the tests of a file (or block), closed after them, and the policy's `api`
// settings that point at it.
import { afterAll, beforeAll } from 'vitest';
import { startEmulator, type RunningEmulator, type StartEmulatorOptions } from '../../src/emulator/server.ts';
import type { ApiSettings } from '../../src/policy/schema.ts';
import { currentOf } from './current.ts';

/**
 * Call at the top of a file (or inside a describe block): an emulator started before the block's
 * tests and closed after them. The returned emulator stands for the running one; read its
 * members inside tests and hooks, not while the file is collected.
 */
export function useEmulator(options: StartEmulatorOptions = {}): RunningEmulator {
  let emulator: RunningEmulator | undefined;
  beforeAll(async () => {
    emulator = await startEmulator({ port: 0, ...options });
  });
  afterAll(async () => {
    await emulator?.close();
    emulator = undefined;
  });
  return currentOf('useEmulator', () => emulator);
}

/**
 * A policy's `api` settings for the emulator at `baseUrl`. The token is a reference nothing reads:
 * these tests hand the runtime the emulator's owner token themselves.
 */
export function emulatorApi(baseUrl: string): ApiSettings {
  return {
    baseUrl,
    credential: { type: 'bearer', token: 'env:UNUSED' },
    methods: { roll: 'POST', listProjects: 'GET', updateProject: 'PATCH', updateConsent: 'PATCH' },
    timeouts: { headersMs: 5000, bodyMs: 5000 },
    rateLimitPerMinute: 6000,
  };
}
