// Semantic rules the schema alone cannot state: names that refer to other entries, ids that must
// be unique, settings that only make sense together. Runs after the schema parse succeeded.
import { posix } from 'node:path';
import type { BackendConfig } from '../backends/public/config.ts';
import { parseDuration, formatDuration } from './duration.ts';
import { insecureEndpointIssues } from './endpoints.ts';
import { checkConsumers } from './consumers.ts';
import { checkIntake } from './intake.ts';
import type { DocPath, PathIssue } from './issue-text.ts';
import type { DestinationInput, PolicyDocument } from './schema.ts';
import { leaseNeededMs, writeTimeoutOf } from './lease.ts';
import { effectiveSettings, type EffectiveSettings } from './settings.ts';
import { checkNativeRotation } from './native-rotation.ts';
import { checkSlotIds, checkSlotTiming } from './slots.ts';

export function checkPolicy(doc: PolicyDocument): PathIssue[] {
  const issues: PathIssue[] = [];
  const add = (path: DocPath, message: string): void => {
    if (!issues.some((issue) => issue.message === message && samePath(issue.path, path)))
      issues.push({ path, message });
  };

  for (const issue of insecureEndpointIssues(doc)) add(issue.path, issue.message);
  checkNotify(doc, ['defaults', 'notify'], doc.defaults?.notify, add);

  const idAt = new Map<string, number>();
  // Two keys writing one secret would overwrite each other, and would share the lock and the
  // intent marker that live at the primary destination (invariants 5 and 6).
  const placeOwner = new Map<string, string>();

  doc.keys.forEach((key, index) => {
    const keyPath: DocPath = ['keys', index];
    const firstIndex = idAt.get(key.id);
    if (firstIndex === undefined) idAt.set(key.id, index);
    else
      add(
        [...keyPath, 'id'],
        `${JSON.stringify(key.id)} is already used by keys[${firstIndex}]; key ids must be unique`,
      );

    const places: [DestinationInput, DocPath][] = [
      ...key.destinations.map((destination, at): [DestinationInput, DocPath] => [
        destination,
        [...keyPath, 'destinations', at],
      ]),
      ...(key.fallbacks ?? []).map((destination, at): [DestinationInput, DocPath] => [
        destination,
        [...keyPath, 'fallbacks', at],
      ]),
    ];
    for (const [destination, path] of places) {
      const backend = ownEntry(doc.backends, destination.backend);
      if (backend === undefined) {
        add(
          [...path, 'backend'],
          `backend ${JSON.stringify(destination.backend)} is not defined in backends (${listNames(doc.backends)})`,
        );
        continue;
      }
      checkDestination(destination, backend, path, add);
      const place = placeOf(backend, destination.path);
      const owner = placeOwner.get(place);
      if (owner === undefined) placeOwner.set(place, `keys[${index}] (${key.id})`);
      else
        add(
          [...path, 'path'],
          `${destination.backend}:${destination.path} is already a destination of ${owner}; each secret needs its own path`,
        );
    }

    checkNotify(doc, [...keyPath, 'notify'], key.notify, add);
    checkEffectiveSettings(doc, index, add);
    checkNativeRotation(doc, index, add);
  });
  checkSlotIds(doc, add);
  checkIntake(doc, add);
  checkConsumers(doc, add);
  return issues;
}

function checkDestination(
  destination: DestinationInput,
  backend: BackendConfig,
  path: DocPath,
  add: (path: DocPath, message: string) => void,
): void {
  if (backend.kind === 'file') {
    const normalized = posix.normalize(destination.path);
    if (posix.isAbsolute(destination.path) || normalized === '..' || normalized.startsWith('../')) {
      add(
        [...path, 'path'],
        `must be a relative path inside the directory of file backend ${JSON.stringify(destination.backend)}`,
      );
    }
  }
  const shape = destination.shape;
  if (shape === undefined) return;
  if (shape.format === 'raw' && shape.fields !== undefined && shape.fields.length > 0) {
    add(
      [...path, 'shape', 'fields'],
      'only json values carry fields beside the secret; remove fields or use format: json',
    );
  }
  const fields = shape.fields ?? [];
  const repeated = fields.find((field, at) => fields.indexOf(field) !== at);
  if (repeated !== undefined) add([...path, 'shape', 'fields'], `lists ${JSON.stringify(repeated)} twice`);
  if (shape.secretField !== undefined && (fields as string[]).includes(shape.secretField)) {
    add(
      [...path, 'shape', 'secretField'],
      `${JSON.stringify(shape.secretField)} is also one of the fields; the secret needs a field of its own`,
    );
  }
}

function checkNotify(
  doc: PolicyDocument,
  path: DocPath,
  notify: { onFailure?: string[] | undefined; onSuccess?: string[] | undefined } | undefined,
  add: (path: DocPath, message: string) => void,
): void {
  const sinks = doc.alerts?.sinks ?? {};
  for (const list of ['onFailure', 'onSuccess'] as const) {
    notify?.[list]?.forEach((name, at) => {
      const sink = ownEntry(sinks, name);
      if (sink === undefined)
        add(
          [...path, list, at],
          `sink ${JSON.stringify(name)} is not defined in alerts.sinks (${listNames(sinks)})`,
        );
      // Success notices feed automation (deploy hooks, inventories); chat and paging sinks are for people and failures.
      else if (list === 'onSuccess' && sink.kind !== 'webhook')
        add(
          [...path, list, at],
          `sink ${JSON.stringify(name)} is a ${sink.kind} sink; onSuccess sinks must be kind webhook`,
        );
    });
  }
}

function checkEffectiveSettings(
  doc: PolicyDocument,
  index: number,
  add: (path: DocPath, message: string) => void,
): void {
  const settings = effectiveSettings(doc, index);
  const keyPath: DocPath = ['keys', index];

  if (settings.schedule.value === undefined && settings.maxAge.value === undefined) {
    add(
      keyPath,
      'has neither a schedule nor a maxAge, so it would never be due; set one on the key or in defaults',
    );
  }
  // Durations were validated by the schema; parseDuration cannot throw here.
  if (settings.maxAge.value !== undefined) {
    const maxAgeMs = parseDuration(settings.maxAge.value);
    const minIntervalMs = parseDuration(settings.minInterval.value);
    if (maxAgeMs < minIntervalMs) {
      add(
        moreSpecific(settings.maxAge.path, settings.minInterval.path) ?? keyPath,
        `maxAge (${formatDuration(maxAgeMs)}) is shorter than minInterval (${formatDuration(minIntervalMs)}), so the key would be due before it may rotate again`,
      );
    }
  }
  const initialMs = parseDuration(settings.initialBackoff.value);
  const maxMs = parseDuration(settings.maxBackoff.value);
  checkLease(doc, index, settings, maxMs, add);
  checkSlotTiming(doc, index, settings, add);
  if (initialMs > maxMs) {
    add(
      moreSpecific(settings.initialBackoff.path, settings.maxBackoff.path) ?? keyPath,
      `initialBackoff (${formatDuration(initialMs)}) is longer than maxBackoff (${formatDuration(maxMs)})`,
    );
  }
}

/**
 * Invariant 9: before each roll attempt the lock must cover the attempt and the primary write
 * with all its retries (src/policy/lease.ts); a shorter lockTtl could never start a roll safely.
 */
function checkLease(
  doc: PolicyDocument,
  index: number,
  settings: EffectiveSettings,
  maxBackoffMs: number,
  add: (path: DocPath, message: string) => void,
): void {
  // The raw document: zod's min(1) does not narrow the list's type, so the primary may be absent here.
  const [primary] = doc.keys[index]?.destinations ?? [];
  const backend =
    primary === undefined || !Object.hasOwn(doc.backends, primary.backend)
      ? undefined
      : doc.backends[primary.backend];
  const lockTtlMs = parseDuration(settings.lockTtl.value);
  const needed = leaseNeededMs({
    rollAttemptMs: doc.api.timeouts.headersMs + doc.api.timeouts.bodyMs,
    writeTimeoutMs: writeTimeoutOf(backend),
    attempts: settings.attempts.value,
    maxBackoffMs,
    clockSkewMs: parseDuration(settings.clockSkew.value),
  });
  if (lockTtlMs < needed) {
    add(
      settings.lockTtl.path ?? ['keys', index],
      `lockTtl (${formatDuration(lockTtlMs)}) is shorter than one roll attempt plus the primary write with its retries plus clockSkew (${formatDuration(needed)}): a runner could lose its lock between the roll and the write; raise lockTtl or lower api.timeouts, store.attempts, store.maxBackoff or clockSkew`,
    );
  }
}

/** The path written at the key when one of the two is, else the defaults' one. */
function moreSpecific(a: DocPath | undefined, b: DocPath | undefined): DocPath | undefined {
  if (a?.[0] === 'keys') return a;
  if (b?.[0] === 'keys') return b;
  return a ?? b;
}

/**
 * The entry named `name`, own properties only: a plain object also answers `constructor`,
 * `toString` and `__proto__` from Object.prototype, and a policy naming one of those passed this
 * check while its alerts went nowhere at run time.
 */
function ownEntry<T>(entries: Record<string, T>, name: string): T | undefined {
  return Object.hasOwn(entries, name) ? entries[name] : undefined;
}

/**
 * One string per secret a destination writes, whatever spelling the policy uses: the same server
 * (two backend names may point at one) and the path as the server reads it. AWS takes a secret's
 * name or its ARN (`arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-AbCdEf`, whose last six
 * characters AWS appends to the name); Vault ignores empty segments (`a//b`, `/a/b/` and `a/b`
 * are one secret); a file path is normalised (`a/./b`).
 */
function placeOf(backend: BackendConfig, path: string): string {
  switch (backend.kind) {
    case 'file':
      return ['file', posix.normalize(backend.directory), posix.normalize(path)].join('\u0000');
    case 'vault':
      return [
        'vault',
        new URL(backend.address).href.replace(/\/+$/, ''),
        backend.namespace ?? '',
        trimSlashes(backend.mount),
        trimSlashes(path),
      ].join('\u0000');
    case 'aws': {
      const arn = /^arn:aws[a-z-]*:secretsmanager:([^:]*):[^:]*:secret:(.+)$/.exec(path);
      const region = arn?.[1] ?? backend.region ?? '';
      const name = arn?.[2] === undefined ? path : arn[2].replace(/-[A-Za-z0-9]{6}$/, '');
      return ['aws', backend.endpoint ?? '', region, name].join('\u0000');
    }
  }
}

function trimSlashes(path: string): string {
  return path
    .split('/')
    .filter((segment) => segment !== '')
    .join('/');
}

function listNames(entries: Record<string, unknown>): string {
  const names = Object.keys(entries);
  return names.length === 0 ? 'none are defined' : `defined: ${names.join(', ')}`;
}

function samePath(a: DocPath, b: DocPath): boolean {
  return a.length === b.length && a.every((segment, at) => segment === b[at]);
}
