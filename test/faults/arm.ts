// Arming one fault for an in-process run: API faults are queued in the emulator (or queued when
// the engine reaches the step), backend faults switch the fault proxy, the store's rights or an
// outside writer at the moment the engine makes the step's first backend call. `restore` puts
// everything back before the next run.
import type { Backend } from '../../src/backends/types.ts';
import type { EmulatorFault, EmulatorOperation } from '../../src/emulator/server.ts';
import type { RotationObserver } from '../../src/rotation/types.ts';
import type { QuotaGroup } from '../support/aws-quota-proxy.ts';
import { wrapBackend } from '../rotation/harness.ts';
import type { CaseKey, FaultBench } from './bench.ts';
import type { ApiFault, BackendFault, CaseSpec, MatrixStep, ThrottleFault } from './cases.ts';

/** The engine's roll budget (src/rotation/runtime.ts default): a fault on every attempt exhausts it. */
export const ROLL_ATTEMPTS = 5;

export interface ArmedFault {
  wrapBackend?: (name: string, backend: Backend) => Backend;
  checkpoint?: (step: string) => Promise<void>;
  /** Hears what the faulted run reports besides its audit (throttle answers it counted). */
  observer?: RotationObserver;
  /** The engine's monotonic clock, when the case moves it (a lease that must be refreshed before the roll). */
  monotonicMs?: () => number;
  /** Checks, after the faulted run, what only the fault knows (every throttle answer counted). */
  afterRun?(): { refused: number; counted: number };
  restore(): Promise<void>;
}

const ROLL_FAULTS: Record<ApiFault, { fault: EmulatorFault; count: number }> = {
  'API 429 with Retry-After': { fault: { kind: 'status', status: 429, retryAfter: '1' }, count: 2 },
  'API 429 past the run budget': {
    fault: { kind: 'status', status: 429, retryAfter: '1' },
    count: ROLL_ATTEMPTS,
  },
  'API 500 before applying': { fault: { kind: 'status', status: 500 }, count: 1 },
  'API reset before applying': { fault: { kind: 'drop' }, count: 1 },
  'API 500 after applying': { fault: { kind: 'failAfterApply', then: 'status500' }, count: 1 },
  'API timeout after applying': { fault: { kind: 'failAfterApply', then: 'hang' }, count: 1 },
  'API reset after applying': { fault: { kind: 'failAfterApply', then: 'drop' }, count: 1 },
  'API 500 on every attempt': { fault: { kind: 'status', status: 500 }, count: ROLL_ATTEMPTS },
};

/** The backend call that begins each step (a fault armed there hits the step itself). */
const STEP_CALL: Record<Exclude<MatrixStep, 'roll'>, keyof Backend> = {
  preflight: 'preflight',
  lock: 'acquireLock',
  intent: 'setIntent',
  store: 'writeSecret',
  verify: 'readSecret',
  finish: 'recordRotation',
};

function armApiFault(bench: FaultBench, step: MatrixStep, fault: ApiFault): ArmedFault {
  const restore = (): Promise<void> => {
    bench.emulator.faults.clear();
    return Promise.resolve();
  };
  const inject = (operation: EmulatorOperation, emulatorFault: EmulatorFault, count: number): void => {
    bench.emulator.faults.inject(operation, emulatorFault, count);
  };
  const { fault: emulatorFault, count } = ROLL_FAULTS[fault];
  if (step === 'roll') {
    inject('roll', emulatorFault, count);
    return { restore };
  }
  if (step === 'preflight') {
    // keyroll's credential check at the start of the run (a one-item project list).
    inject('listProjects', emulatorFault, count);
    return { restore };
  }
  if (step === 'verify') {
    // The verify step calls the API with the new key; queued only now so the roll is untouched.
    return {
      checkpoint: (reached) => {
        if (reached === 'verify') inject('listProjects', emulatorFault, count);
        return Promise.resolve();
      },
      restore,
    };
  }
  throw new Error(`no API fault at step ${step}`);
}

async function switchOn(bench: FaultBench, key: CaseKey, fault: BackendFault): Promise<void> {
  const { store } = bench;
  const proxy = store.proxy;
  const need = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${fault} needs ${what} (${store.kind})`);
    return value;
  };
  switch (fault) {
    case 'backend down':
      need(proxy, 'a fault proxy').set({ kind: 'down' });
      return;
    case 'backend slow past the timeout':
      need(proxy, 'a fault proxy').set({ kind: 'silent' });
      return;
    case 'backend down for the first attempts':
      need(proxy, 'a fault proxy').set({ kind: 'downFirst', requests: 2 });
      return;
    case 'backend answer lost after applying':
      need(proxy, 'a fault proxy').set({ kind: 'loseAnswer', requests: 1 });
      return;
    case 'backend permission denied':
      await need(store.denyWrites, 'a way to narrow its rights')();
      return;
    case 'backend check-and-set conflict':
      await need(store.writeFromOutside, 'an outside writer')(key.target);
      return;
  }
}

function armBackendFault(bench: FaultBench, key: CaseKey, step: MatrixStep, fault: BackendFault): ArmedFault {
  if (step === 'roll') throw new Error('backend faults hit the backend steps, not the roll');
  const call = STEP_CALL[step];
  let armed = false;
  let stored = false;
  const arm = async (): Promise<void> => {
    if (armed) return;
    armed = true;
    await switchOn(bench, key, fault);
  };
  return {
    wrapBackend: (name, backend) => {
      if (name !== 'primary') return backend;
      return wrapBackend(backend, {
        writeSecret: async (next) => {
          if (call === 'writeSecret') await arm();
          const result = await next();
          stored = true;
          return result;
        },
        ...(call === 'writeSecret'
          ? {}
          : {
              [call]: async (next: () => Promise<unknown>) => {
                // The read-back of verify, not the probes before the roll.
                if (call !== 'readSecret' || stored) await arm();
                return next();
              },
            }),
      });
    },
    restore: async () => {
      bench.store.proxy?.set({ kind: 'pass' });
      if (fault === 'backend permission denied') await bench.store.allowWrites?.();
    },
  };
}

const THROTTLED_GROUPS: Readonly<Record<ThrottleFault, readonly QuotaGroup[]>> = {
  'AWS throttles the write group': ['write'],
  'AWS throttles the tag group': ['tag'],
  'AWS throttles the write and tag groups': ['write', 'tag'],
};

/** Refusals per group: as many as the SDK's own two attempts met before keyroll waited throttling out (they failed the key), well inside the wait budget. */
export const THROTTLED_CALLS = 2;

/** The next THROTTLED_CALLS calls of the fault's groups are refused, from the step's first backend call on. */
function armThrottleFault(bench: FaultBench, step: MatrixStep, fault: ThrottleFault): ArmedFault {
  const quota = bench.store.quota;
  if (quota === undefined)
    throw new Error(`${fault} needs the AWS quota proxy (startFaultBench('aws', { awsQuotas: true }))`);
  const groups = THROTTLED_GROUPS[fault];
  quota.resetCounts();
  let armed = false;
  let stored = false;
  const arm = (): void => {
    if (armed) return;
    armed = true;
    quota.refuseNext(groups, THROTTLED_CALLS);
  };
  let counted = 0;
  const observer: RotationObserver = {
    stepDuration: () => undefined,
    exposure: () => undefined,
    throttled: () => {
      counted++;
    },
  };
  const refused = (): number => Object.values(quota.throttledByGroup()).reduce((sum, n) => sum + n, 0);
  const restore = (): Promise<void> => {
    quota.refuseNext(groups, 0);
    return Promise.resolve();
  };
  if (step === 'roll') {
    return {
      checkpoint: (reached) => {
        if (reached === 'roll') arm();
        return Promise.resolve();
      },
      observer,
      afterRun: () => ({ refused: refused(), counted }),
      restore,
    };
  }
  const call = STEP_CALL[step];
  return {
    wrapBackend: (name, backend) => {
      if (name !== 'primary') return backend;
      return wrapBackend(backend, {
        writeSecret: async (next) => {
          if (call === 'writeSecret') arm();
          const result = await next();
          stored = true;
          return result;
        },
        ...(call === 'writeSecret'
          ? {}
          : {
              [call]: (next: () => unknown) => {
                // The read-back of verify, not the probes before the roll.
                if (call !== 'readSecret' || stored) arm();
                return next();
              },
            }),
      });
    },
    observer,
    afterRun: () => ({ refused: refused(), counted }),
    restore,
  };
}

function isApiFault(fault: string): fault is ApiFault {
  return fault.startsWith('API ');
}

/** Arms the case's fault (for an alert-sink case: the failure it must report). */
export function armFault(bench: FaultBench, key: CaseKey, spec: CaseSpec): ArmedFault {
  const fault = spec.during ?? spec.fault;
  if (isApiFault(fault)) return armApiFault(bench, spec.step, fault);
  if (fault.startsWith('backend ')) return armBackendFault(bench, key, spec.step, fault as BackendFault);
  if (fault.startsWith('AWS throttles ')) return armThrottleFault(bench, spec.step, fault as ThrottleFault);
  throw new Error(`${fault} is not armed in-process`);
}
