// The settings of one key as they take effect: the key's own value, else `defaults`, else the
// built-in default. Each value remembers where it was written, so a semantic check can point
// at the line that has to change (the key's, or the shared default's).
import type { DocPath } from './issue-text.ts';
import type { KeyInput, PolicyDocument } from './schema.ts';

/** What applies when neither the key nor `defaults` says otherwise (documented in docs/policy.md). */
export const BUILTIN_DEFAULTS = {
  timezone: 'UTC',
  minInterval: '1h',
  lockTtl: '15m',
  clockSkew: '10s',
  verify: { readBack: true, apiCall: true },
  store: { attempts: 5, initialBackoff: '200ms', maxBackoff: '5s' },
  notify: { onSuccess: [] as string[] },
  driftCheck: '1h',
  onDrift: 'rotate',
  failures: { backoff: { initial: '1h', cap: '24h', jitter: 0.2 }, quarantineAfter: 5, remindEvery: '24h' },
  refreshConsumers: 'needed',
} as const;

export interface Sourced<T> {
  value: T;
  /** Where the value is written; undefined for a built-in default. */
  path?: DocPath;
}

export interface EffectiveSettings {
  schedule: Sourced<string | undefined>;
  timezone: Sourced<string>;
  maxAge: Sourced<string | undefined>;
  minInterval: Sourced<string>;
  lockTtl: Sourced<string>;
  clockSkew: Sourced<string>;
  readBack: Sourced<boolean>;
  apiCall: Sourced<boolean>;
  attempts: Sourced<number>;
  initialBackoff: Sourced<string>;
  maxBackoff: Sourced<string>;
  /** Without any notify.onFailure, failures go to every sink (invariant 7: every failure is visible). */
  onFailure: Sourced<string[]>;
  onSuccess: Sourced<string[]>;
  /** Undefined when `null` switched the check off (the path then points at the null). */
  driftCheck: Sourced<string | undefined>;
  onDrift: Sourced<'rotate' | 'alert'>;
  backoffInitial: Sourced<string>;
  backoffCap: Sourced<string>;
  backoffJitter: Sourced<number>;
  quarantineAfter: Sourced<number>;
  remindEvery: Sourced<string>;
  refreshConsumers: Sourced<'needed' | 'always'>;
  /** Slot entries only; never inherited (a consumer's refresh time belongs to the consumer of one entry). */
  consumerRefresh: Sourced<string | undefined>;
}

type Group = 'verify' | 'store' | 'notify' | 'failures';
type TopField =
  | 'schedule'
  | 'timezone'
  | 'maxAge'
  | 'minInterval'
  | 'lockTtl'
  | 'clockSkew'
  | 'driftCheck'
  | 'onDrift'
  | 'refreshConsumers';
type TopSettings = Pick<KeyInput, TopField>;

export function effectiveSettings(doc: PolicyDocument, keyIndex: number): EffectiveSettings {
  const key = doc.keys[keyIndex];
  if (key === undefined) throw new RangeError(`no key at index ${keyIndex}`);
  const defaults = doc.defaults ?? {};
  const keyPath: DocPath = ['keys', keyIndex];

  // Both hold the same settings fields; naming them as one type lets `top` index either.
  const own: TopSettings = key;
  const shared: TopSettings = defaults;
  function top<F extends TopField>(field: F): Sourced<TopSettings[F]> {
    if (own[field] !== undefined) return { value: own[field], path: [...keyPath, field] };
    if (shared[field] !== undefined) return { value: shared[field], path: ['defaults', field] };
    return { value: undefined };
  }
  function nested<T>(group: Group, field: string, builtin: T): Sourced<T> {
    const own = (key?.[group] as Record<string, unknown> | undefined)?.[field];
    if (own !== undefined) return { value: own as T, path: [...keyPath, group, field] };
    const shared = (defaults[group] as Record<string, unknown> | undefined)?.[field];
    if (shared !== undefined) return { value: shared as T, path: ['defaults', group, field] };
    return { value: builtin };
  }
  // failures.backoff is one level deeper than the other groups; each field is inherited on its own.
  function backoff<T>(field: 'initial' | 'cap' | 'jitter', builtin: T): Sourced<T> {
    const own = (key?.failures?.backoff as Record<string, unknown> | undefined)?.[field];
    if (own !== undefined) return { value: own as T, path: [...keyPath, 'failures', 'backoff', field] };
    const shared = (defaults.failures?.backoff as Record<string, unknown> | undefined)?.[field];
    if (shared !== undefined) return { value: shared as T, path: ['defaults', 'failures', 'backoff', field] };
    return { value: builtin };
  }
  // `null` switches off an inherited schedule or maxAge; it is still "written" at the key.
  const withoutNull = <T>(sourced: Sourced<T | null | undefined>): Sourced<T | undefined> => ({
    ...sourced,
    value: sourced.value ?? undefined,
  });
  const orBuiltin = <T extends string>(sourced: Sourced<T | undefined>, builtin: T): Sourced<T> =>
    sourced.value === undefined
      ? { value: builtin }
      : { value: sourced.value, ...(sourced.path ? { path: sourced.path } : {}) };
  // Unlike schedule and maxAge, driftCheck has a built-in default: absent means 1h, `null` means off.
  const driftCheck = (sourced: Sourced<string | null | undefined>): Sourced<string | undefined> =>
    sourced.value === undefined ? { value: BUILTIN_DEFAULTS.driftCheck } : withoutNull(sourced);

  return {
    schedule: withoutNull(top('schedule')),
    timezone: orBuiltin(top('timezone'), BUILTIN_DEFAULTS.timezone),
    maxAge: withoutNull(top('maxAge')),
    minInterval: orBuiltin(top('minInterval'), BUILTIN_DEFAULTS.minInterval),
    lockTtl: orBuiltin(top('lockTtl'), BUILTIN_DEFAULTS.lockTtl),
    clockSkew: orBuiltin(top('clockSkew'), BUILTIN_DEFAULTS.clockSkew),
    readBack: nested('verify', 'readBack', BUILTIN_DEFAULTS.verify.readBack),
    apiCall: nested('verify', 'apiCall', BUILTIN_DEFAULTS.verify.apiCall),
    attempts: nested('store', 'attempts', BUILTIN_DEFAULTS.store.attempts),
    initialBackoff: nested('store', 'initialBackoff', BUILTIN_DEFAULTS.store.initialBackoff),
    maxBackoff: nested('store', 'maxBackoff', BUILTIN_DEFAULTS.store.maxBackoff),
    onFailure: nested('notify', 'onFailure', Object.keys(doc.alerts?.sinks ?? {})),
    onSuccess: nested('notify', 'onSuccess', [...BUILTIN_DEFAULTS.notify.onSuccess]),
    driftCheck: driftCheck(top('driftCheck')),
    onDrift: orBuiltin(top('onDrift'), BUILTIN_DEFAULTS.onDrift),
    backoffInitial: backoff<string>('initial', BUILTIN_DEFAULTS.failures.backoff.initial),
    backoffCap: backoff<string>('cap', BUILTIN_DEFAULTS.failures.backoff.cap),
    backoffJitter: backoff<number>('jitter', BUILTIN_DEFAULTS.failures.backoff.jitter),
    quarantineAfter: nested('failures', 'quarantineAfter', BUILTIN_DEFAULTS.failures.quarantineAfter),
    remindEvery: nested<string>('failures', 'remindEvery', BUILTIN_DEFAULTS.failures.remindEvery),
    refreshConsumers: orBuiltin(top('refreshConsumers'), BUILTIN_DEFAULTS.refreshConsumers),
    consumerRefresh:
      key.consumerRefresh === undefined
        ? { value: undefined }
        : { value: key.consumerRefresh, path: [...keyPath, 'consumerRefresh'] },
  };
}
