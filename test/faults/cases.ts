// The fault matrix (issue 6): one list of { step, fault } with the stores it makes sense on and
// what the faulted run must report. The matrix-*.test.ts files turn it into named tests, one per
// (case, store). API faults go through the emulator's fault injection; backend faults through the
// TCP fault proxy in front of OpenBao and moto (a file directory has no network to break);
// SIGTERM and SIGKILL hit `keyroll rotate` as a child process.
import type { FaultCaseResult } from './record.ts';
import type { StoreKind } from './stores.ts';

export type MatrixStep = 'preflight' | 'lock' | 'intent' | 'roll' | 'store' | 'verify' | 'finish';

export type ApiFault =
  | 'API 429 with Retry-After'
  | 'API 429 past the run budget'
  | 'API 500 before applying'
  | 'API reset before applying'
  | 'API 500 after applying'
  | 'API timeout after applying'
  | 'API reset after applying'
  | 'API 500 on every attempt';

export type BackendFault =
  | 'backend down'
  | 'backend slow past the timeout'
  | 'backend permission denied'
  | 'backend check-and-set conflict'
  | 'backend down for the first attempts'
  | 'backend answer lost after applying';

export type SinkFault = 'alert sink answers 500' | 'alert sink closed';

/** AWS's quota answers (test/support/aws-quota-proxy.ts): the next calls of a quota group are refused with ThrottlingException. */
export type ThrottleFault =
  'AWS throttles the write group' | 'AWS throttles the tag group' | 'AWS throttles the write and tag groups';

export type SignalFault = 'SIGTERM' | 'SIGKILL';

export type Fault = ApiFault | BackendFault | SinkFault | SignalFault | ThrottleFault;

/** Where a secret goes when no destination takes it. */
export type SafetyNet = 'none' | 'escrow' | 'fallback';

export interface CaseSpec {
  step: MatrixStep;
  fault: Fault;
  /** For an alert-sink fault: the failure whose alert the sink must carry. */
  during?: ApiFault | BackendFault;
  stores: readonly StoreKind[];
  safetyNet?: SafetyNet;
  /** What the faulted run reports for the key (`aborted`: the whole run was aborted). */
  expect: FaultCaseResult;
  /** Part of the CI subset (KEYROLL_FAULTS unset); KEYROLL_FAULTS=full runs every case. */
  ci?: boolean;
}

const ALL: readonly StoreKind[] = ['file', 'vault', 'aws'];
const SERVERS: readonly StoreKind[] = ['vault', 'aws'];

export const API_CASES: readonly CaseSpec[] = [
  { step: 'roll', fault: 'API 429 with Retry-After', stores: ALL, expect: 'rotated', ci: true },
  { step: 'roll', fault: 'API 429 past the run budget', stores: ALL, expect: 'failed' },
  { step: 'roll', fault: 'API 500 before applying', stores: ALL, expect: 'rotated' },
  { step: 'roll', fault: 'API reset before applying', stores: ALL, expect: 'rotated' },
  { step: 'roll', fault: 'API 500 after applying', stores: ALL, expect: 'rotated', ci: true },
  { step: 'roll', fault: 'API timeout after applying', stores: ALL, expect: 'rotated', ci: true },
  { step: 'roll', fault: 'API reset after applying', stores: ALL, expect: 'rotated', ci: true },
  { step: 'roll', fault: 'API 500 on every attempt', stores: ALL, expect: 'failed' },
  // keyroll's own credential check before any roll is the API's part of preflight.
  { step: 'preflight', fault: 'API 500 on every attempt', stores: ALL, expect: 'aborted' },
  // The verify step calls the API with the new key.
  { step: 'verify', fault: 'API 500 on every attempt', stores: ALL, expect: 'failed' },
];

export const BACKEND_CASES: readonly CaseSpec[] = [
  { step: 'preflight', fault: 'backend down', stores: SERVERS, expect: 'failed', ci: true },
  { step: 'preflight', fault: 'backend slow past the timeout', stores: SERVERS, expect: 'failed', ci: true },
  { step: 'preflight', fault: 'backend permission denied', stores: SERVERS, expect: 'failed', ci: true },
  { step: 'lock', fault: 'backend down', stores: SERVERS, expect: 'failed' },
  { step: 'lock', fault: 'backend slow past the timeout', stores: SERVERS, expect: 'failed' },
  { step: 'lock', fault: 'backend permission denied', stores: SERVERS, expect: 'failed' },
  { step: 'intent', fault: 'backend down', stores: SERVERS, expect: 'failed' },
  { step: 'intent', fault: 'backend slow past the timeout', stores: SERVERS, expect: 'failed' },
  { step: 'intent', fault: 'backend permission denied', stores: SERVERS, expect: 'failed' },
  { step: 'store', fault: 'backend down', stores: SERVERS, safetyNet: 'none', expect: 'failed', ci: true },
  { step: 'store', fault: 'backend down', stores: SERVERS, safetyNet: 'escrow', expect: 'failed', ci: true },
  {
    step: 'store',
    fault: 'backend down',
    stores: SERVERS,
    safetyNet: 'fallback',
    expect: 'failed',
    ci: true,
  },
  {
    step: 'store',
    fault: 'backend slow past the timeout',
    stores: SERVERS,
    safetyNet: 'none',
    expect: 'failed',
  },
  { step: 'store', fault: 'backend permission denied', stores: SERVERS, safetyNet: 'none', expect: 'failed' },
  {
    step: 'store',
    fault: 'backend permission denied',
    stores: SERVERS,
    safetyNet: 'escrow',
    expect: 'failed',
  },
  {
    step: 'store',
    fault: 'backend check-and-set conflict',
    stores: ['vault'],
    safetyNet: 'none',
    expect: 'failed',
    ci: true,
  },
  {
    step: 'store',
    fault: 'backend down for the first attempts',
    stores: SERVERS,
    expect: 'rotated',
    ci: true,
  },
  {
    step: 'store',
    fault: 'backend answer lost after applying',
    stores: SERVERS,
    expect: 'rotated',
    ci: true,
  },
  { step: 'verify', fault: 'backend down', stores: SERVERS, expect: 'failed' },
  { step: 'verify', fault: 'backend slow past the timeout', stores: SERVERS, expect: 'failed' },
  { step: 'finish', fault: 'backend down', stores: SERVERS, expect: 'failed' },
  { step: 'finish', fault: 'backend permission denied', stores: SERVERS, expect: 'failed' },
];

export const SINK_CASES: readonly CaseSpec[] = [
  {
    step: 'roll',
    fault: 'alert sink answers 500',
    during: 'API 500 on every attempt',
    stores: ALL,
    expect: 'failed',
    ci: true,
  },
  {
    step: 'roll',
    fault: 'alert sink closed',
    during: 'API 500 on every attempt',
    stores: ALL,
    expect: 'failed',
  },
  {
    step: 'store',
    fault: 'alert sink closed',
    during: 'backend down',
    stores: SERVERS,
    safetyNet: 'none',
    expect: 'failed',
    ci: true,
  },
];

/**
 * Invariant 11: a throttle answer is waited out, never a failure. Armed when the engine reaches the
 * step (the next calls of the group are refused, wherever in the rotation they come), on moto
 * behind the quota proxy; every case must end rotated, and keyroll must have counted every
 * refusal the proxy sent.
 */
const THROTTLE_FAULTS: readonly ThrottleFault[] = [
  'AWS throttles the write group',
  'AWS throttles the tag group',
  'AWS throttles the write and tag groups',
];
const THROTTLE_CI: ReadonlySet<string> = new Set([
  'preflight AWS throttles the write and tag groups',
  'lock AWS throttles the write group',
  'intent AWS throttles the tag group',
  'store AWS throttles the write group',
  'finish AWS throttles the tag group',
]);
export const THROTTLE_CASES: readonly CaseSpec[] = (
  ['preflight', 'lock', 'intent', 'roll', 'store', 'verify', 'finish'] as const
).flatMap((step) =>
  THROTTLE_FAULTS.map((fault): CaseSpec => ({
    step,
    fault,
    stores: ['aws'],
    expect: 'rotated',
    ...(THROTTLE_CI.has(`${step} ${fault}`) ? { ci: true } : {}),
  })),
);

/** Child-process cases: where the signal lands, and how the process is held there. */
export const SIGNAL_CASES: readonly CaseSpec[] = [
  // Paused at the step (KEYROLL_TEST_PAUSE_AT), then killed.
  { step: 'intent', fault: 'SIGKILL', stores: ALL, expect: 'aborted' },
  // The API applied the roll and holds the answer: the only copy of the secret dies with the process.
  { step: 'roll', fault: 'SIGKILL', stores: ALL, expect: 'aborted', ci: true },
  { step: 'verify', fault: 'SIGKILL', stores: ALL, expect: 'aborted' },
  { step: 'finish', fault: 'SIGKILL', stores: ALL, expect: 'aborted' },
  // The roll answer is held while SIGTERM arrives: the key in flight finishes its store, the next key is not started.
  { step: 'roll', fault: 'SIGTERM', stores: ALL, expect: 'aborted', ci: true },
  // The lock request is held at the proxy while SIGTERM arrives: nothing is rolled.
  { step: 'lock', fault: 'SIGTERM', stores: SERVERS, expect: 'aborted', ci: true },
];

export const FAULT_CASES: readonly CaseSpec[] = [
  ...API_CASES,
  ...BACKEND_CASES,
  ...SINK_CASES,
  ...THROTTLE_CASES,
  ...SIGNAL_CASES,
];

/** Whether the suite runs every case (KEYROLL_FAULTS=full) or the CI subset. */
export function fullMatrix(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.KEYROLL_FAULTS === 'full';
}

export function casesFor(
  store: StoreKind,
  kinds: readonly CaseSpec[],
  env: NodeJS.ProcessEnv = process.env,
): CaseSpec[] {
  const full = fullMatrix(env);
  return kinds.filter((spec) => spec.stores.includes(store) && (full || spec.ci === true));
}

export function caseName(spec: CaseSpec, store: StoreKind): string {
  const during = spec.during ? ` during ${spec.during}` : '';
  const net =
    spec.safetyNet && spec.safetyNet !== 'none'
      ? `, ${spec.safetyNet} as safety net`
      : spec.safetyNet === 'none'
        ? ', no safety net'
        : '';
  return `${spec.step} × ${spec.fault}${during}${net} (${store})`;
}
