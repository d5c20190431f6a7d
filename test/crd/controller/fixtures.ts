// A key policy and key outcomes for the controller's unit tests (no servers).
import type { KeyState } from '../../../src/backends/types.ts';
import type { ConsumerRef } from '../../../src/policy/consumers.ts';
import type { KeyPolicy } from '../../../src/policy/schema.ts';
import type { KeyOutcome } from '../../../src/rotation/types.ts';
import { keyPolicy } from '../../rotation/harness.ts';

export const HOUR = 3_600_000;
export const DAY = 24 * HOUR;

/** The policy of key_billing (org_billing): maxAge 30 days, minInterval an hour. */
export function keyWith(overrides: Partial<KeyPolicy> = {}): KeyPolicy {
  return keyPolicy('key_billing', 'org_billing', overrides);
}

export const DEPLOYMENT = {
  kind: 'deployment',
  namespace: 'billing',
  name: 'billing',
} as unknown as ConsumerRef;

export function stateWith(overrides: Partial<KeyState> = {}): KeyState {
  return { exists: true, ...overrides };
}

export function rotated(overrides: Partial<KeyOutcome> = {}): KeyOutcome {
  return {
    keyId: 'key_billing',
    organizationId: 'org_billing',
    rotationId: 'rot_2',
    durationMs: 1200,
    rolls: 1,
    rotatedAt: '2026-11-29T10:00:00.250Z',
    reason: 'scheduled',
    result: 'rotated',
    ...overrides,
  } as KeyOutcome;
}

export function failed(overrides: Partial<KeyOutcome> = {}): KeyOutcome {
  return {
    keyId: 'key_billing',
    organizationId: 'org_billing',
    rotationId: 'rot_3',
    durationMs: 900,
    rolls: 0,
    result: 'failed',
    step: 'preflight',
    errorCode: 'KR_BACKEND_DENIED',
    ...overrides,
  } as KeyOutcome;
}
