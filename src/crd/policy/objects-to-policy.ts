// keyroll.io objects → today's policy document (issue 31). A pure function: the daemon's watch
// hands it every object it holds and the namespaces' labels, and gets back the document the
// policy code validates and resolves unchanged (so scheduler, launcher and rotation stay as they
// are), which RotatedKey became which key entry, and every refusal. A refused key is left out and
// the others go on: one team's mistake, or one hostile tenant, never stops another's rotations.
import type { BackendConfig } from '../../backends/public/config.ts';
import { checkPolicy } from '../../policy/public/check.ts';
import { PolicyDocument } from '../../policy/public/schema.ts';
import type { ClusterKeyApiObject, KeyrollObject, KeyStoreObject, RotatedKeyObject } from '../kinds/kinds.ts';
import { judgedHere, keyEntryOf, type Candidate, type ObjectIndex } from './key-entry.ts';
import { refName, type ObjectRef, type Refusal } from './refusal.ts';
import { keyStoreVerdict, type NamespaceLabels } from './tenancy.ts';

/** What every key shares and the objects do not say: the daemon's own policy file (or flags). */
export type SharedSettings = Pick<PolicyDocument, 'alerts' | 'escrow' | 'intake' | 'consumers'>;

export interface PolicyOptions {
  /** keyroll's own namespace: its KeyStores are the platform team's, and may hold local references. */
  keyrollNamespace: string;
  /** Every namespace's labels, for the conditions' namespaceSelectors (a namespace not listed has none). */
  namespaces: NamespaceLabels;
  /**
   * The ClusterKeyApi this daemon rotates with (a policy has one api): the settings' `keyApi`. It
   * also says which RotatedKeys are this install's to judge (key-entry.ts, judgedHere); absent:
   * the only one there is, and this install is the cluster's only one.
   */
  api?: string;
  /** alerts, escrow, intake and consumers, from the daemon's policy file; absent: none. */
  shared?: SharedSettings;
}

export interface PolicyFromObjects {
  /** Undefined when no key is left (a policy needs one) or there is no ClusterKeyApi to serve. */
  document: PolicyDocument | undefined;
  /** RotatedKey `namespace/name` → its key entry's id in the document. */
  keys: Map<string, string>;
  refusals: Refusal[];
  /**
   * RotatedKeys (`namespace/name`) this install does not judge (key-entry.ts, judgedHere): another
   * keyroll install's, or, naming a missing ClusterKeyApi that is not this install's `keyApi`, no
   * install's here. Neither keys nor refusals, so nothing is audited or written on them here.
   */
  others: string[];
}

/** A key entry in the claims of ids and places: this install's, or another's (holds, never refused here). */
interface Claimant {
  candidate: Candidate;
  ours: boolean;
  /** The API server its ids are ids of: two ClusterKeyApis on one server roll the same keys. */
  server: string;
}

export function objectsToPolicy(
  objects: readonly KeyrollObject[],
  options: PolicyOptions,
): PolicyFromObjects {
  const { index, refusals } = indexObjects(objects, options);
  const claimants: Claimant[] = [];
  const others: string[] = [];
  for (const object of rotatedKeys(objects)) {
    if (!judgedHere(object, index)) {
      others.push(refName(objectRef(object)));
      const claimant = othersClaim(object, index);
      if (claimant !== undefined) claimants.push(claimant);
      continue;
    }
    const outcome = keyEntryOf(object, index);
    if (!outcome.ok) refusals.push(refusalOf(object, outcome.reason, outcome.message));
    else if (index.served === undefined)
      refusals.push(refusalOf(object, 'InvalidSpec', 'no ClusterKeyApi is served'));
    else {
      const issue = ownIssue(outcome.candidate, index.served, options.shared);
      if (issue === undefined)
        claimants.push({ candidate: outcome.candidate, ours: true, server: apiServer(index.served) });
      else refusals.push(refusalOf(object, 'InvalidSpec', issue));
    }
  }
  const accepted = claimInOrder(claimants, refusals);
  const document = assemble(accepted, index.served, options.shared, refusals);
  const keys = new Map<string, string>();
  if (document !== undefined)
    for (const candidate of accepted) keys.set(refName(objectRef(candidate.object)), candidate.entry.id);
  return { document, keys, refusals, others };
}

/**
 * Another install's key as far as the objects say it would be rotated (its own ClusterKeyApi's
 * conditions, the stores'): what it holds, a key of ours may not take. Its store paths, because
 * both installs would write the one secret; its ids on the same API server, because both would
 * roll the one key. Its settings' own checks are not ours to run: a key it refuses for them alone
 * still holds here, which refuses ours (never theirs) at worst.
 */
function othersClaim(object: RotatedKeyObject, index: ObjectIndex): Claimant | undefined {
  const api = index.apis.get(object.spec.apiRef.name);
  if (api === undefined) return undefined;
  const outcome = keyEntryOf(object, { ...index, served: api, keyApi: api.metadata.name });
  return outcome.ok ? { candidate: outcome.candidate, ours: false, server: apiServer(api) } : undefined;
}

/** The API server a ClusterKeyApi rolls keys on, written one way (host case, default port, trailing `/`). */
function apiServer(api: ClusterKeyApiObject): string {
  try {
    const url = new URL(api.spec.baseUrl);
    return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
  } catch {
    return api.spec.baseUrl;
  }
}

function indexObjects(
  objects: readonly KeyrollObject[],
  options: PolicyOptions,
): { index: ObjectIndex; refusals: Refusal[] } {
  const refusals: Refusal[] = [];
  const apis = new Map<string, ClusterKeyApiObject>();
  const clusterStores = new Map<string, Extract<KeyrollObject, { kind: 'ClusterKeyStore' }>>();
  const keyStores = new Map<string, KeyStoreObject>();
  const refusedKeyStores = new Map<string, Refusal>();
  for (const object of objects) {
    if (object.kind === 'ClusterKeyApi') apis.set(object.metadata.name, object);
    else if (object.kind === 'ClusterKeyStore') clusterStores.set(object.metadata.name, object);
    else if (object.kind === 'KeyStore') {
      const at = refName(objectRef(object));
      keyStores.set(at, object);
      const verdict = keyStoreVerdict(object, options.keyrollNamespace);
      if (verdict === undefined) continue;
      const refusal = refusalOf(object, verdict.reason, verdict.message);
      refusedKeyStores.set(at, refusal);
      refusals.push(refusal);
    }
  }
  const served =
    options.api === undefined ? (apis.size === 1 ? [...apis.values()][0] : undefined) : apis.get(options.api);
  return {
    index: {
      apis,
      served,
      keyApi: options.api,
      clusterStores,
      keyStores,
      refusedKeyStores,
      namespaces: options.namespaces,
    },
    refusals,
  };
}

/** RotatedKeys oldest first (creationTimestamp, then namespace/name): the order claims are granted in. */
function rotatedKeys(objects: readonly KeyrollObject[]): RotatedKeyObject[] {
  const keys = objects.filter((object): object is RotatedKeyObject => object.kind === 'RotatedKey');
  const created = (object: RotatedKeyObject): string => {
    const value = object.metadata['creationTimestamp'];
    return typeof value === 'string' ? value : '';
  };
  return keys.sort((a, b) => {
    const byTime = created(a).localeCompare(created(b));
    return byTime !== 0 ? byTime : refName(objectRef(a)).localeCompare(refName(objectRef(b)));
  });
}

/** The document holding only this key: the policy's own checks of the entry, the issue they find. */
function ownIssue(
  candidate: Candidate,
  api: ClusterKeyApiObject,
  shared: SharedSettings | undefined,
): string | undefined {
  const parsed = PolicyDocument.safeParse(documentOf([candidate], api, shared));
  const issues = parsed.success
    ? checkPolicy(parsed.data)
    : parsed.error.issues.map((issue) => ({
        path: issue.path.filter((segment) => typeof segment !== 'symbol'),
        message: issue.message,
      }));
  // Issues of the shared settings alone (an intake scope naming a key) are the daemon's, not the key's.
  const own = issues.find((issue) => ['keys', 'backends', 'api'].includes(String(issue.path[0])));
  return own === undefined ? undefined : `${describePath(own.path)}: ${own.message}`;
}

/** Who holds an id or a place: a RotatedKey `namespace/name`, of this install or another. */
interface Holder {
  owner: string;
  ours: boolean;
}

/**
 * Grants, oldest first, each API key id (the entry's id and its slots: the policy wants all of
 * them unique; an id is one key on one API server) and each destination (store and path) to one
 * RotatedKey; a later object claiming one already granted is refused, never the earlier. Refusing
 * both would let a newcomer stop a working key by copying its id or path; refusing the later keeps
 * the one that was there first. Another install's keys hold their claims too (both installs see
 * every object, so both grant alike) but are never refused nor accepted here: only ours are.
 */
function claimInOrder(claimants: readonly Claimant[], refusals: Refusal[]): Candidate[] {
  const ids = new Map<string, Holder>();
  const places = new Map<string, Holder>();
  const accepted: Candidate[] = [];
  for (const { candidate, ours, server } of claimants) {
    const holder = { owner: refName(objectRef(candidate.object)), ours };
    const wanted = [candidate.entry.id, ...(candidate.entry.slots ?? [])];
    const entries = [...candidate.entry.destinations, ...(candidate.entry.fallbacks ?? [])];
    const paths = entries.map((entry) => `${entry.backend}\u0000${entry.path}`);
    const takenId = wanted.find((id) => ids.has(`${server}\u0000${id}`));
    const takenPath = paths.findIndex((place) => places.has(place));
    if (takenId !== undefined) {
      if (ours)
        refusals.push(
          refusalOf(
            candidate.object,
            'KeyIdInUse',
            `${whose(ids.get(`${server}\u0000${takenId}`), candidate)} already rotates ${takenId}`,
          ),
        );
    } else if (takenPath >= 0) {
      const taken = entries[takenPath];
      if (ours)
        refusals.push(
          refusalOf(
            candidate.object,
            'PathInUse',
            `${whose(places.get(paths[takenPath] ?? ''), candidate)} already writes ${taken?.path ?? ''} in ${taken?.backend ?? ''}`,
          ),
        );
    } else {
      for (const id of wanted) ids.set(`${server}\u0000${id}`, holder);
      for (const place of paths) places.set(place, holder);
      if (ours) accepted.push(candidate);
    }
  }
  return accepted;
}

/** Names the earlier owner only to its own namespace: a tenant learns no other team's object names. */
function whose(holder: Holder | undefined, candidate: Candidate): string {
  const named =
    holder?.owner.startsWith(`${candidate.namespace}/`) === true
      ? `RotatedKey ${holder.owner}`
      : 'an older RotatedKey';
  return holder?.ours === false ? `${named} of another keyroll install` : named;
}

/**
 * The document of the accepted keys. The whole document is checked once more (two stores naming
 * one server and path, slot ids shared across entries); a key it finds an issue in is refused
 * and the check runs again without it, so the document returned always passes the policy's checks.
 */
function assemble(
  accepted: Candidate[],
  api: ClusterKeyApiObject | undefined,
  shared: SharedSettings | undefined,
  refusals: Refusal[],
): PolicyDocument | undefined {
  let keys = accepted;
  while (keys.length > 0 && api !== undefined) {
    const document = documentOf(keys, api, shared);
    const conflicts = new Map<number, string>();
    for (const issue of checkPolicy(document)) {
      const [root, at] = issue.path;
      if (root === 'keys' && typeof at === 'number' && !conflicts.has(at))
        conflicts.set(at, `${describePath(issue.path.slice(2))}: ${issue.message}`);
    }
    if (conflicts.size === 0) return document;
    for (const [at, message] of conflicts) {
      const candidate = keys[at];
      if (candidate !== undefined) refusals.push(refusalOf(candidate.object, 'PolicyConflict', message));
    }
    keys = keys.filter((_, at) => !conflicts.has(at));
    accepted.splice(0, accepted.length, ...keys);
  }
  accepted.splice(0);
  return undefined;
}

function documentOf(
  keys: readonly Candidate[],
  api: ClusterKeyApiObject,
  shared: SharedSettings | undefined,
): PolicyDocument {
  const backends: Record<string, BackendConfig> = {};
  for (const key of keys) Object.assign(backends, key.backends);
  const { conditions: _conditions, ...settings } = api.spec;
  return {
    version: 1,
    api: settings,
    backends,
    ...shared,
    keys: keys.map((key) => key.entry),
  };
}

function describePath(path: readonly (string | number)[]): string {
  return path.map((segment) => String(segment)).join('.') || 'spec';
}

function objectRef(object: KeyrollObject): ObjectRef {
  const namespace = object.metadata.namespace;
  return namespace === undefined
    ? { kind: object.kind, name: object.metadata.name }
    : { kind: object.kind, namespace, name: object.metadata.name };
}

function refusalOf(object: KeyrollObject, reason: Refusal['reason'], message: string): Refusal {
  return { object: objectRef(object), reason, message };
}
