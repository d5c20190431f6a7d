// `keyroll status --keys-from kubernetes` (issue 31 §5: status reads the same state the objects
// show): the four keyroll.io kinds and the namespaces listed once (no watch), the policy built
// from them with the settings file by the daemon's own function (crd/policy/build-policy.ts), so
// status reads the keys the daemon rotates, from the same primary destinations the status writer
// reads. Each row names its RotatedKey; each object the build refused is a row of its own with the
// refusal's reason and message, never dropped. A refused key's backends are not read: its
// destination is one the tenancy checks did not admit, and keyroll's credentials must not report
// on a path a tenant was refused.
import { GROUP, VERSION } from '../crd/public/kinds/common.ts';
import { KINDS, KIND_NAMES, type KindName } from '../crd/public/kinds/kinds.ts';
import { buildPolicyFromObjects } from '../crd/public/policy/build-policy.ts';
import { refName, type Refusal } from '../crd/public/policy/refusal.ts';
import { KubeResourceClient, type WatchRequests } from '../crd/public/watch/kube-client.ts';
import type { WatchedObject, WatchedResource } from '../crd/public/watch/resource.ts';
import type { Policy } from '../policy/public/schema.ts';
import { loadSharedSettings } from '../policy/public/settings-file.ts';
import type { KeysFromKubernetes } from './keys-from.ts';
import type { StatusRow } from './status-table.ts';

/** Objects per list page (the reflector's page size). */
const PAGE_SIZE = 500;

/** The policy built from the objects, and what status adds to its rows. */
export interface ObjectsStatus {
  policy: Policy;
  /** Key id → its RotatedKey's `namespace/name`. */
  objectOf: ReadonlyMap<string, string>;
  /** A RotatedKey's `namespace/name` → the key id it rotates (refused ones are not here). */
  keyOf: ReadonlyMap<string, string>;
  refusals: readonly Refusal[];
  /** Each RotatedKey's spec as listed, by `namespace/name`: a refused key's row shows the id and organization it asks for. */
  rotatedKeys: ReadonlyMap<string, WatchedObject>;
}

function resourceOf(kind: KindName | 'Namespace'): WatchedResource {
  if (kind === 'Namespace') return { group: '', version: 'v1', plural: 'namespaces' };
  return { group: GROUP, version: VERSION, plural: KINDS[kind].plural };
}

/** Every object of `resource`, page by page. Throws CrdError naming the request (403, unreachable ...). */
async function listAll(requests: WatchRequests, resource: WatchedResource): Promise<WatchedObject[]> {
  const signal = new AbortController().signal;
  const items: WatchedObject[] = [];
  let next: string | undefined;
  do {
    const page = await requests.list(
      resource,
      { limit: PAGE_SIZE, ...(next === undefined ? {} : { continue: next }) },
      signal,
    );
    items.push(...page.items);
    next = page.continue;
  } while (next !== undefined);
  return items;
}

/**
 * Reads the settings file (PolicyError: exit 2), lists the objects once and builds the policy as
 * the daemon does. `requests` stands in for the API server in unit tests.
 */
export async function objectsStatusPolicy(
  settingsFile: string,
  keysFrom: KeysFromKubernetes,
  requests: WatchRequests = new KubeResourceClient(keysFrom.kubeConfig),
): Promise<ObjectsStatus> {
  const settings = await loadSharedSettings(settingsFile);
  const kinds = [...KIND_NAMES, 'Namespace'] as const;
  const lists = await Promise.all(kinds.map((kind) => listAll(requests, resourceOf(kind))));
  const listed = new Map(kinds.map((kind, at) => [kind, lists[at] ?? []]));
  const built = buildPolicyFromObjects(
    { objects: (kind) => listed.get(kind) ?? [], namespaces: () => listed.get('Namespace') ?? [] },
    settings,
    { keyrollNamespace: keysFrom.namespace, file: settingsFile },
  );
  const rotatedKeys = new Map<string, WatchedObject>();
  for (const object of listed.get('RotatedKey') ?? []) {
    const name = object.metadata?.name;
    if (name !== undefined) rotatedKeys.set(refName({ namespace: object.metadata?.namespace, name }), object);
  }
  return {
    policy: built.policy,
    objectOf: new Map([...built.keys].map(([object, keyId]) => [keyId, object])),
    keyOf: new Map(built.keys),
    refusals: built.refusals,
    rotatedKeys,
  };
}

/** How a row names an object: `namespace/name` for a RotatedKey, else `Kind name`. */
export function objectName(refusal: Refusal['object']): string {
  return refusal.kind === 'RotatedKey' ? refName(refusal) : `${refusal.kind} ${refName(refusal)}`;
}

/** Names each key row's RotatedKey. */
export function nameObjects(rows: StatusRow[], objects: ObjectsStatus): void {
  for (const row of rows) {
    const object = objects.objectOf.get(row.keyId);
    if (object !== undefined) row.object = object;
  }
}

/** One row per refused object: what it asks for (a RotatedKey's id and organization) and why it was refused. */
export function refusalRows(objects: ObjectsStatus): StatusRow[] {
  return objects.refusals.map((refusal) => {
    const spec =
      refusal.object.kind === 'RotatedKey'
        ? objects.rotatedKeys.get(refName(refusal.object))?.spec
        : undefined;
    const field = (name: string): string => {
      const value =
        typeof spec === 'object' && spec !== null ? (spec as Record<string, unknown>)[name] : undefined;
      return typeof value === 'string' ? value : '';
    };
    return {
      keyId: field('id'),
      organizationId: field('organization'),
      scheduler: 'keyroll',
      lastRotatedAt: null,
      lastRotationId: null,
      nextDueAt: null,
      due: null,
      overdue: null,
      lock: null,
      intent: null,
      lastFailure: null,
      lastProbe: null,
      failureStreak: null,
      distrusted: [],
      object: objectName(refusal.object),
      kind: refusal.object.kind,
      refused: { reason: refusal.reason, message: refusal.message },
    };
  });
}
