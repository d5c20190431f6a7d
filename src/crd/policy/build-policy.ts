// The policy keyroll builds from the keyroll.io objects it holds (issue 31): every object parsed as
// `keyroll validate` reads them (one that does not parse is refused InvalidSpec), the namespaces'
// labels for the conditions' selectors, the settings file's shared sections, objectsToPolicy, and
// the document resolved as a policy file's is. One function for the daemon, whose reflectors hold
// the objects (src/daemon/object-keys.ts), and `keyroll status --keys-from kubernetes`, which lists
// them once: both show and rotate the same keys, refused for the same reasons.
import { policyFromDocument, policyWithoutKeys } from '../../policy/public/from-document.ts';
import type { Policy } from '../../policy/public/schema.ts';
import type { SharedSettingsFile } from '../../policy/public/settings-file.ts';
import { KeyrollObject, KIND_NAMES, type KindName } from '../kinds/kinds.ts';
import type { WatchedObject } from '../watch/resource.ts';
import { objectsToPolicy, type SharedSettings } from './objects-to-policy.ts';
import type { Refusal } from './refusal.ts';

/** What is held of the API server: each kind's objects as it sent them, and the namespaces. */
export interface HeldObjects {
  objects(kind: KindName): Iterable<WatchedObject>;
  namespaces(): Iterable<WatchedObject>;
}

export interface BuildOptions {
  /** keyroll's own namespace: its KeyStores are the platform team's. */
  keyrollNamespace: string;
  /** The settings file (the daemon's and status's --policy): the policy's `file`. */
  file: string;
  /** Parses one object; the daemon's caches each version's parse. Default: KeyrollObject.safeParse. */
  parse?: (raw: WatchedObject) => ReturnType<typeof KeyrollObject.safeParse>;
}

/** One build: the policy, which RotatedKey became which key, and every refusal. */
export interface BuiltPolicy {
  policy: Policy;
  /** RotatedKey `namespace/name` → its key id in the policy. */
  keys: ReadonlyMap<string, string>;
  refusals: readonly Refusal[];
  /** The document as JSON: two builds with one fingerprint are one policy. */
  fingerprint: string;
}

/** Builds the policy of `held` with the settings file's shared sections. Throws PolicyError as a policy file's load does. */
export function buildPolicyFromObjects(
  held: HeldObjects,
  settings: SharedSettingsFile,
  options: BuildOptions,
): BuiltPolicy {
  const { objects, unreadable } = readObjects(held, options.parse ?? ((raw) => KeyrollObject.safeParse(raw)));
  const shared: SharedSettings = {
    ...(settings.alerts === undefined ? {} : { alerts: settings.alerts }),
    ...(settings.escrow === undefined ? {} : { escrow: settings.escrow }),
    ...(settings.intake === undefined ? {} : { intake: settings.intake }),
    ...(settings.consumers === undefined ? {} : { consumers: settings.consumers }),
  };
  const result = objectsToPolicy(objects, {
    keyrollNamespace: options.keyrollNamespace,
    namespaces: namespaceLabels(held),
    ...(settings.keyApi === undefined ? {} : { api: settings.keyApi }),
    shared,
  });
  const policy =
    result.document === undefined
      ? policyWithoutKeys(shared, options.file)
      : policyFromDocument(result.document, options.file);
  return {
    policy,
    keys: result.keys,
    refusals: [...unreadable, ...result.refusals],
    fingerprint: JSON.stringify(result.document ?? { shared }),
  };
}

/** Every keyroll.io object held, parsed as `keyroll validate` reads them; one that does not parse is refused. */
function readObjects(
  held: HeldObjects,
  parse: NonNullable<BuildOptions['parse']>,
): { objects: KeyrollObject[]; unreadable: Refusal[] } {
  const objects: KeyrollObject[] = [];
  const unreadable: Refusal[] = [];
  for (const kind of KIND_NAMES) {
    for (const raw of held.objects(kind)) {
      const parsed = parse(raw);
      if (parsed.success) {
        objects.push(parsed.data);
        continue;
      }
      const [issue] = parsed.error.issues;
      const field = issue?.path.filter((segment) => typeof segment !== 'symbol').join('.') ?? '';
      const namespace = raw.metadata?.namespace;
      unreadable.push({
        object: { kind, ...(namespace === undefined ? {} : { namespace }), name: raw.metadata?.name ?? '' },
        reason: 'InvalidSpec',
        message: `${field === '' ? 'the object' : field}: ${issue?.message ?? 'does not parse'}`,
      });
    }
  }
  return { objects, unreadable };
}

function namespaceLabels(held: HeldObjects): Map<string, Record<string, string>> {
  const labels = new Map<string, Record<string, string>>();
  for (const namespace of held.namespaces()) {
    const name = namespace.metadata?.name;
    if (name !== undefined) labels.set(name, namespace.metadata?.labels ?? {});
  }
  return labels;
}
