// Stakater Reloader (github.com/stakater/Reloader, read at v1.4.19: internal/pkg/handler/upgrade.go,
// pkg/common/common.go ShouldReload). Reloader restarts a workload by itself when a Secret it
// watches for the workload changes: it patches the pod template the moment external-secrets writes
// the new value. keyroll must not restart such a workload a second time: it waits for Reloader's
// rollout, proves it, and reports it (refresher.ts).
//
// What Reloader reads, with its default annotation names (a Reloader started with other names, or
// with --auto-reload-all, is not recognised and keyroll restarts the workload itself):
// - on the workload's metadata, or, when none of the four below is there, on its pod template:
//   `secret.reloader.stakater.com/reload` (comma-separated names, each an anchored regular
//   expression), `reloader.stakater.com/auto` or `secret.reloader.stakater.com/auto` ("true": any
//   Secret a container references), `reloader.stakater.com/search` ("true": any referenced Secret
//   annotated `reloader.stakater.com/match: "true"`);
// - `secrets.exclude.reloader.stakater.com/reload` on the workload's metadata (names skipped), and
//   `reloader.stakater.com/ignore: "true"` on the Secret (never reloaded for).
// keyroll does not read Secrets (its Role grants none): the Secret's annotations are those the
// ExternalSecret's target template gives it.
//
// What Reloader changes (its default strategy, env-vars): an environment variable
// STAKATER_<SECRET NAME>_SECRET holding the SHA-1 of the Secret's data, in the container that uses
// it; with --reload-strategy=annotations, the pod template annotation
// `reloader.stakater.com/last-reloaded-from` (JSON: type SECRET, name, hash). `reloaderMark` reads
// both: a mark that differs from the one read before the sync was asked for is Reloader's restart.
import type { KubeObject } from '../kubernetes/client.ts';

export const RELOADER = {
  reload: 'secret.reloader.stakater.com/reload',
  auto: 'reloader.stakater.com/auto',
  secretAuto: 'secret.reloader.stakater.com/auto',
  search: 'reloader.stakater.com/search',
  match: 'reloader.stakater.com/match',
  ignore: 'reloader.stakater.com/ignore',
  exclude: 'secrets.exclude.reloader.stakater.com/reload',
  lastReloadedFrom: 'reloader.stakater.com/last-reloaded-from',
} as const;

/** The Secret an ExternalSecret writes, as Reloader sees it: its name and the annotations its template gives it. */
export interface WatchedSecret {
  name: string;
  annotations: Readonly<Record<string, string>>;
}

interface Container {
  name?: string;
  env?: { name?: string; value?: string; valueFrom?: { secretKeyRef?: { name?: string } } }[];
  envFrom?: { secretRef?: { name?: string } }[];
  volumeMounts?: { name?: string }[];
}

interface Volume {
  name?: string;
  secret?: { secretName?: string };
  projected?: { sources?: { secret?: { name?: string } }[] };
}

interface PodTemplate {
  metadata?: { annotations?: Record<string, string> };
  spec?: { containers?: Container[]; initContainers?: Container[]; volumes?: Volume[] };
}

function templateOf(workload: KubeObject): PodTemplate {
  const spec = workload.spec as { template?: PodTemplate } | undefined;
  return spec?.template ?? {};
}

/** The Secret an ExternalSecret writes: spec.target.name (default its own name) and spec.target.template.metadata.annotations. */
export function targetSecretOf(externalSecret: KubeObject): WatchedSecret {
  const target = (
    externalSecret.spec as
      { target?: { name?: unknown; template?: { metadata?: { annotations?: unknown } } } } | undefined
  )?.target;
  const name =
    typeof target?.name === 'string' && target.name !== ''
      ? target.name
      : (externalSecret.metadata?.name ?? '');
  const raw = target?.template?.metadata?.annotations;
  const annotations: Record<string, string> = {};
  if (typeof raw === 'object' && raw !== null)
    for (const [key, value] of Object.entries(raw)) if (typeof value === 'string') annotations[key] = value;
  return { name, annotations };
}

/** Reloader's own test of a container reference (getContainerUsingResource): a mounted volume, an env or envFrom reference, in a container or an init container. */
function references(template: PodTemplate, secret: string): boolean {
  const containers = [...(template.spec?.containers ?? []), ...(template.spec?.initContainers ?? [])];
  const volumes = (template.spec?.volumes ?? [])
    .filter(
      (volume) =>
        volume.secret?.secretName === secret ||
        (volume.projected?.sources ?? []).some((source) => source.secret?.name === secret),
    )
    .map((volume) => volume.name);
  return containers.some(
    (container) =>
      (container.volumeMounts ?? []).some((mount) => volumes.includes(mount.name)) ||
      (container.env ?? []).some((env) => env.valueFrom?.secretKeyRef?.name === secret) ||
      (container.envFrom ?? []).some((from) => from.secretRef?.name === secret),
  );
}

/** Go's regexp.MustCompile("^" + value + "$") as JavaScript reads it; a pattern JavaScript refuses matches nothing. */
function matchesName(pattern: string, name: string): boolean {
  try {
    return new RegExp(`^${pattern}$`).test(name);
  } catch {
    return false;
  }
}

const TRIGGERS = [RELOADER.reload, RELOADER.search, RELOADER.auto, RELOADER.secretAuto] as const;

/** Whether Reloader restarts `workload` when `secret` changes (ShouldReload, then the container it would change). */
export function reloaderWatches(workload: KubeObject, secret: WatchedSecret): boolean {
  if (secret.annotations[RELOADER.ignore] === 'true') return false;
  const own = workload.metadata?.annotations ?? {};
  const template = templateOf(workload);
  const excluded = own[RELOADER.exclude];
  if (excluded !== undefined && excluded.split(',').some((name) => name.trim() === secret.name)) return false;
  const annotations = TRIGGERS.some((trigger) => own[trigger] !== undefined)
    ? own
    : (template.metadata?.annotations ?? {});
  // By name: Reloader changes the first container even when none references the Secret.
  if (
    (annotations[RELOADER.reload] ?? '')
      .split(',')
      .some((pattern) => matchesName(pattern.trim(), secret.name))
  )
    return true;
  const referenced = references(template, secret.name);
  if (annotations[RELOADER.search] === 'true' && secret.annotations[RELOADER.match] === 'true' && referenced)
    return true;
  const on = (value: string | undefined): boolean =>
    value !== undefined && ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(value);
  return (on(annotations[RELOADER.auto]) || on(annotations[RELOADER.secretAuto])) && referenced;
}

/** Reloader's environment variable for a Secret (getEnvVarName, util.ConvertToEnvVarName). */
export function reloaderEnvName(secret: string): string {
  let out = '';
  let lastValid = false;
  for (const char of secret.toUpperCase()) {
    if (/[A-Z0-9]/.test(char)) {
      out += char;
      lastValid = true;
    } else {
      if (lastValid) out += '_';
      lastValid = false;
    }
  }
  return `STAKATER_${out}_SECRET`;
}

/**
 * What Reloader last wrote on the pod template for `secret`: its environment variable's value (the
 * Secret's hash) in each container, and the last-reloaded-from annotation when it names the Secret.
 * Holds hashes of the Secret's data, never its values; compared, never shown.
 */
export function reloaderMark(workload: KubeObject, secret: string): string {
  const template = templateOf(workload);
  const env = reloaderEnvName(secret);
  const values = [...(template.spec?.containers ?? []), ...(template.spec?.initContainers ?? [])].map(
    (container) => container.env?.find((entry) => entry.name === env)?.value ?? '',
  );
  let annotation = '';
  const raw = template.metadata?.annotations?.[RELOADER.lastReloadedFrom];
  if (raw !== undefined) {
    try {
      const source = JSON.parse(raw) as { type?: unknown; name?: unknown; hash?: unknown };
      if (source.type === 'SECRET' && source.name === secret && typeof source.hash === 'string')
        annotation = source.hash;
    } catch {
      // Not Reloader's JSON: not a mark of it.
    }
  }
  return JSON.stringify({ env: values, annotation });
}

/** A workload Reloader restarts for some of the Secrets a delivery syncs, with its marks read before the syncs were asked for. */
export interface ReloaderWatch {
  secrets: string[];
  /** Secret name → reloaderMark before the syncs. */
  before: ReadonlyMap<string, string>;
}

export function reloaderWatch(
  workload: KubeObject,
  secrets: readonly WatchedSecret[],
): ReloaderWatch | undefined {
  const watched = secrets.filter((secret) => reloaderWatches(workload, secret)).map((secret) => secret.name);
  if (watched.length === 0) return undefined;
  return { secrets: watched, before: new Map(watched.map((name) => [name, reloaderMark(workload, name)])) };
}

/** Whether Reloader has changed the pod template for one of the watched Secrets since the marks were read. */
export function reloaderRestarted(workload: KubeObject, watch: ReloaderWatch): boolean {
  return watch.secrets.some((name) => reloaderMark(workload, name) !== watch.before.get(name));
}
