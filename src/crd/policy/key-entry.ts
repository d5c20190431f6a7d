// One RotatedKey → one key entry of the policy, or the reason it is refused. Checks here are the
// object's own (its namespace against the ClusterKeyApi's and the stores' conditions); what
// depends on the other keys (an API key id or a path taken first) is objects-to-policy.ts's.
import { z } from 'zod';
import { BackendConfig } from '../../backends/public/config.ts';
import type { KeyInput } from '../../policy/public/schema.ts';
import type {
  ClusterKeyApiObject,
  ClusterKeyStoreObject,
  KeyStoreObject,
  RotatedKeyObject,
} from '../kinds/kinds.ts';
import type { StoreDestination } from '../kinds/rotated-key.ts';
import { DEFAULT_PATH_PREFIX } from '../kinds/key-store.ts';
import { checkPath } from './paths.ts';
import { refName, type Refusal, type RefusalReason } from './refusal.ts';
import { admits, keyIdAdmitted, type NamespaceLabels } from './tenancy.ts';

export type KeyEntry = z.output<typeof KeyInput>;
type DestinationEntry = KeyEntry['destinations'][number];

/** The objects a key entry is built against, indexed by name. */
export interface ObjectIndex {
  /** ClusterKeyApis by name. */
  apis: ReadonlyMap<string, ClusterKeyApiObject>;
  /** The ClusterKeyApi this daemon rotates with; undefined: none (or several and none chosen). */
  served: ClusterKeyApiObject | undefined;
  /** The ClusterKeyApi the daemon's settings name (`keyApi`); undefined: they name none. */
  keyApi: string | undefined;
  clusterStores: ReadonlyMap<string, ClusterKeyStoreObject>;
  /** KeyStores by `namespace/name`. */
  keyStores: ReadonlyMap<string, KeyStoreObject>;
  /** Refusals of KeyStores by `namespace/name` (tenancy.ts, keyStoreVerdict). */
  refusedKeyStores: ReadonlyMap<string, Refusal>;
  namespaces: NamespaceLabels;
}

export interface Candidate {
  object: RotatedKeyObject;
  namespace: string;
  entry: KeyEntry;
  /** The backends the entry's destinations name, by their policy name. */
  backends: Record<string, BackendConfig>;
}

type Outcome = { ok: true; candidate: Candidate } | Refused;
type Refused = { ok: false; reason: RefusalReason; message: string };
type Placed = { ok: true; destination: DestinationEntry; name: string; backend: BackendConfig } | Refused;
type PlacedList = { ok: true; list: DestinationEntry[] } | Refused;

/** Backend names that cannot collide: a namespace has no dots, so `keystore.<ns>.<name>` splits one way. */
export function clusterStoreBackend(name: string): string {
  return `clusterkeystore.${name}`;
}
export function keyStoreBackend(namespace: string, name: string): string {
  return `keystore.${namespace}.${name}`;
}

/**
 * Whether this keyroll install judges `object` (docs/crds.md, "Two keyroll installs"). An install
 * whose settings name its ClusterKeyApi (`keyApi`) judges the RotatedKeys naming that one, whether
 * it exists or not (ApiNotFound is then its own word). An install whose settings name none says it
 * is alone: it judges every key but those naming another existing ClusterKeyApi than the only one
 * it serves; with several and none chosen, every key (ApiNotServed: tell it which). A RotatedKey
 * not judged here is another install's: never refused, audited or written by this one, or two
 * installs would each write Ready=False on the other's keys and the statuses would flip.
 */
export function judgedHere(object: RotatedKeyObject, index: ObjectIndex): boolean {
  const name = object.spec.apiRef.name;
  if (index.keyApi !== undefined) return name === index.keyApi;
  return index.served === undefined || index.served.metadata.name === name || !index.apis.has(name);
}

/** The key entry of `object`, or why it is refused. */
export function keyEntryOf(object: RotatedKeyObject, index: ObjectIndex): Outcome {
  const namespace = object.metadata.namespace;
  if (namespace === undefined)
    return { ok: false, reason: 'InvalidSpec', message: 'a RotatedKey needs a namespace' };
  const spec = object.spec;
  for (const consumer of spec.consumers ?? []) {
    // The schema has no namespace field for a consumer (the API server prunes one); an object
    // that reached us another way may still carry one, and it must not name another team's.
    const named: unknown = (consumer as Record<string, unknown>)['namespace'];
    if (named !== undefined && named !== namespace)
      return {
        ok: false,
        reason: 'ConsumerOutsideNamespace',
        message: `consumer ${consumer.kind === 'webhook' ? consumer.sink : consumer.name} names namespace ${JSON.stringify(named)}; a consumer is in the RotatedKey's own namespace`,
      };
  }
  const api = apiVerdict(object, namespace, index);
  if (api !== undefined) return { ok: false, ...api };

  const backends: Record<string, BackendConfig> = {};
  const place = (list: readonly StoreDestination[]): PlacedList => {
    const placed: DestinationEntry[] = [];
    for (const destination of list) {
      const result = placeDestination(destination, namespace, index);
      if (!result.ok) return result;
      backends[result.name] = result.backend;
      placed.push(result.destination);
    }
    return { ok: true, list: placed };
  };
  const destinations = place(spec.destinations);
  if (!destinations.ok) return destinations;
  const fallbacks = place(spec.fallbacks ?? []);
  if (!fallbacks.ok) return fallbacks;

  const { apiRef: _apiRef, destinations: _d, fallbacks: _f, consumers, ...rest } = spec;
  const entry: KeyEntry = {
    ...rest,
    destinations: destinations.list,
    ...(spec.fallbacks === undefined ? {} : { fallbacks: fallbacks.list }),
    ...(consumers === undefined
      ? {}
      : {
          consumers: consumers.map((consumer) =>
            consumer.kind === 'webhook' ? consumer : { ...consumer, namespace },
          ),
        }),
  };
  return { ok: true, candidate: { object, namespace, entry, backends } };
}

function apiVerdict(
  object: RotatedKeyObject,
  namespace: string,
  index: ObjectIndex,
): { reason: RefusalReason; message: string } | undefined {
  const name = object.spec.apiRef.name;
  const api = index.apis.get(name);
  if (api === undefined) return { reason: 'ApiNotFound', message: `ClusterKeyApi ${name} does not exist` };
  // Only an install whose settings name no ClusterKeyApi, with several there, judges a key of one
  // it does not serve (judgedHere): the key's owner is unknown, and so is this install's own API.
  if (index.served !== api)
    return {
      reason: 'ApiNotServed',
      message:
        index.served === undefined
          ? `several ClusterKeyApis exist and this keyroll's settings name none (keyApi): it rotates no key`
          : `ClusterKeyApi ${name} is not the one this keyroll rotates with (${index.served.metadata.name})`,
    };
  const organization = object.spec.organization;
  const conditions = api.spec.conditions.filter(
    (condition) =>
      condition.organizations.includes(organization) && admits(condition, namespace, index.namespaces),
  );
  if (conditions.length === 0)
    return {
      reason: 'OrganizationNotAdmitted',
      message: `no condition of ClusterKeyApi ${name} admits namespace ${namespace} for organization ${organization}`,
    };
  // The ids the API is asked to roll: a slot entry's two slots (its own id is the entry's name,
  // never rolled: src/rotation/slots.ts), else the key's id. All of them under one condition.
  const rolled = object.spec.slots ?? [object.spec.id];
  if (conditions.some((condition) => rolled.every((id) => keyIdAdmitted(condition.keyIds, id))))
    return undefined;
  const outside = rolled.find((id) => !conditions.some((condition) => keyIdAdmitted(condition.keyIds, id)));
  return {
    reason: 'KeyIdNotAdmitted',
    message:
      outside === undefined
        ? `no single condition of ClusterKeyApi ${name} admits namespace ${namespace} for both slots ${rolled.join(' and ')}`
        : `no condition of ClusterKeyApi ${name} that admits namespace ${namespace} for organization ${organization} lists key id ${outside} in its keyIds`,
  };
}

function placeDestination(destination: StoreDestination, namespace: string, index: ObjectIndex): Placed {
  const { storeRef, ...rest } = destination;
  const entry = (name: string): DestinationEntry => ({ ...rest, backend: name });
  if (storeRef.kind === 'KeyStore') {
    // Looked up in the key's own namespace only: a KeyStore of another namespace cannot be named.
    const at = refName({ namespace, name: storeRef.name });
    const store = index.keyStores.get(at);
    if (store === undefined)
      return { ok: false, reason: 'StoreNotFound', message: `KeyStore ${at} does not exist` };
    const refused = index.refusedKeyStores.get(at);
    if (refused !== undefined)
      return {
        ok: false,
        reason: 'KeyStoreRefused',
        message: `KeyStore ${at} is refused: ${refused.message}`,
      };
    const name = keyStoreBackend(namespace, storeRef.name);
    return { ok: true, destination: entry(name), name, backend: store.spec };
  }
  const store = index.clusterStores.get(storeRef.name);
  if (store === undefined)
    return { ok: false, reason: 'StoreNotFound', message: `ClusterKeyStore ${storeRef.name} does not exist` };
  const conditions = store.spec.conditions.filter((condition) =>
    admits(condition, namespace, index.namespaces),
  );
  if (conditions.length === 0)
    return {
      ok: false,
      reason: 'StoreNotAdmitted',
      message: `no condition of ClusterKeyStore ${storeRef.name} admits namespace ${namespace}`,
    };
  // Under the prefix of any condition that admits the namespace; the first verdict explains a refusal.
  const verdicts = conditions.map((condition) =>
    checkPath(destination.path, condition.pathPrefix ?? DEFAULT_PATH_PREFIX, namespace),
  );
  if (!verdicts.some((verdict) => verdict.ok)) {
    // Under an admitting prefix but not written plainly says more than "outside" another prefix.
    const refusal =
      verdicts.find((verdict) => !verdict.ok && verdict.reason === 'PathNotCanonical') ?? verdicts[0];
    if (refusal !== undefined && !refusal.ok)
      return {
        ok: false,
        reason: refusal.reason,
        message: `ClusterKeyStore ${storeRef.name}: ${refusal.message}`,
      };
  }
  // The store's backend without its conditions: the policy's own (strict) BackendConfig.
  const { conditions: _conditions, ...backend } = store.spec;
  const name = clusterStoreBackend(storeRef.name);
  return { ok: true, destination: entry(name), name, backend: BackendConfig.parse(backend) };
}
