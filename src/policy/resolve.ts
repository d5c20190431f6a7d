// From the document as written to the policy keyroll runs: defaults merged into every key,
// durations in milliseconds, destinations as backend name + StoreTarget. Runs only on a
// document that passed the schema and checkPolicy, so every reference here exists.
import type { StoreTarget, ValueShape } from '../backends/public/types.ts';
import {
  CONSUMER_DEFAULTS,
  resolveRestartWindow,
  type ConsumerRef,
  type ConsumerSettings,
} from './consumers.ts';
import { parseDuration } from './duration.ts';
import type { Destination, DestinationInput, KeyPolicy, Policy, PolicyDocument } from './schema.ts';
import { effectiveSettings } from './settings.ts';

/** The shape of a destination that names none: JSON with the secret under `apiKey`. */
export const DEFAULT_SHAPE: Readonly<ValueShape> = Object.freeze<ValueShape>({
  format: 'json',
  secretField: 'apiKey',
  fields: ['keyId', 'organizationId', 'rotatedAt'],
});

export function resolvePolicy(doc: PolicyDocument, file: string): Policy {
  return {
    file,
    api: doc.api,
    backends: doc.backends,
    alerts: { sinks: doc.alerts?.sinks ?? {} },
    ...(doc.escrow === undefined
      ? {}
      : { escrow: { directory: doc.escrow.directory, recipients: [...doc.escrow.recipients] } }),
    keys: doc.keys.map((_, index) => resolveKey(doc, index)),
    ...(doc.intake === undefined ? {} : { intake: doc.intake }),
    consumers: resolveConsumerSettings(doc.consumers),
  };
}

function resolveConsumerSettings(input: PolicyDocument['consumers']): ConsumerSettings {
  const kubernetes = input?.kubernetes;
  return {
    kubernetes: {
      ...(kubernetes?.kubeconfig === undefined ? {} : { kubeconfig: kubernetes.kubeconfig }),
      ...(kubernetes?.context === undefined ? {} : { context: kubernetes.context }),
    },
    syncTimeoutMs: parseDuration(input?.syncTimeout ?? CONSUMER_DEFAULTS.syncTimeout),
    rolloutTimeoutMs: parseDuration(input?.rolloutTimeout ?? CONSUMER_DEFAULTS.rolloutTimeout),
    reloaderTimeoutMs: parseDuration(input?.reloaderTimeout ?? CONSUMER_DEFAULTS.reloaderTimeout),
    maxConcurrentRestarts: input?.maxConcurrentRestarts ?? CONSUMER_DEFAULTS.maxConcurrentRestarts,
    ...(input?.restartWindow === undefined
      ? {}
      : { restartWindow: resolveRestartWindow(input.restartWindow) }),
  };
}

function resolveConsumer(
  input: NonNullable<PolicyDocument['keys'][number]['consumers']>[number],
): ConsumerRef {
  return input.kind === 'webhook'
    ? { kind: 'webhook', sink: input.sink }
    : { kind: input.kind, namespace: input.namespace, name: input.name };
}

/** The schema requires one destination at least (`.min(1)`); this tells the compiler so. */
function nonEmpty<T>(list: T[], keyId: string): [T, ...T[]] {
  const [first, ...rest] = list;
  if (first === undefined) throw new RangeError(`key ${keyId} has no destination`);
  return [first, ...rest];
}

function resolveKey(doc: PolicyDocument, index: number): KeyPolicy {
  const key = doc.keys[index];
  if (key === undefined) throw new RangeError(`no key at index ${index}`);
  const settings = effectiveSettings(doc, index);
  return {
    id: key.id,
    organizationId: key.organization,
    destinations: nonEmpty(key.destinations.map(resolveDestination), key.id),
    fallbacks: (key.fallbacks ?? []).map(resolveDestination),
    ...(settings.schedule.value === undefined ? {} : { schedule: settings.schedule.value }),
    timezone: settings.timezone.value,
    ...(settings.maxAge.value === undefined ? {} : { maxAgeMs: parseDuration(settings.maxAge.value) }),
    minIntervalMs: parseDuration(settings.minInterval.value),
    lockTtlMs: parseDuration(settings.lockTtl.value),
    clockSkewMs: parseDuration(settings.clockSkew.value),
    verify: { readBack: settings.readBack.value, apiCall: settings.apiCall.value },
    store: {
      attempts: settings.attempts.value,
      initialBackoffMs: parseDuration(settings.initialBackoff.value),
      maxBackoffMs: parseDuration(settings.maxBackoff.value),
    },
    notify: { onFailure: [...settings.onFailure.value], onSuccess: [...settings.onSuccess.value] },
    labels: { ...(key.labels ?? {}) },
    ...(key.slots === undefined ? {} : { slots: slotPair(key.slots) }),
    ...(settings.consumerRefresh.value === undefined
      ? {}
      : { consumerRefreshMs: parseDuration(settings.consumerRefresh.value) }),
    ...(settings.driftCheck.value === undefined
      ? {}
      : { driftCheckMs: parseDuration(settings.driftCheck.value) }),
    onDrift: settings.onDrift.value,
    ...(key.scheduler === 'aws-native' ? { scheduler: 'aws-native' as const } : {}),
    failures: {
      backoffInitialMs: parseDuration(settings.backoffInitial.value),
      backoffCapMs: parseDuration(settings.backoffCap.value),
      jitter: settings.backoffJitter.value,
      quarantineAfter: settings.quarantineAfter.value,
      remindEveryMs: parseDuration(settings.remindEvery.value),
    },
    ...(key.consumers === undefined || key.consumers.length === 0
      ? {}
      : { consumers: key.consumers.map(resolveConsumer) }),
    refreshConsumers: settings.refreshConsumers.value,
  };
}

/** The schema admits exactly two slots; the tuple type lets the engine name them without index checks. */
function slotPair(slots: readonly string[]): readonly [string, string] {
  const [first, second] = slots;
  if (first === undefined || second === undefined || slots.length !== 2)
    throw new RangeError('a slot entry has exactly two slots');
  return Object.freeze([first, second] as const);
}

function resolveDestination(input: DestinationInput): Destination {
  const format = input.shape?.format ?? DEFAULT_SHAPE.format;
  const shape: ValueShape = {
    format,
    secretField: input.shape?.secretField ?? DEFAULT_SHAPE.secretField,
    // A raw value is the secret alone; fields would have nowhere to go.
    fields: format === 'raw' ? [] : [...(input.shape?.fields ?? DEFAULT_SHAPE.fields)],
  };
  const target: StoreTarget = { path: input.path, shape };
  return { backend: input.backend, target };
}
