// What a reflector watches (one resource: group, version, plural, all namespaces or one) and the
// little of each object it reads itself: names, resourceVersion, uid, generation. The rest of an
// object (spec, status) is its kind's to parse, tolerantly.

/** One resource of the API: `group` '' is the core group (/api/v1: configmaps, events). */
export interface WatchedResource {
  group: string;
  version: string;
  /** The resource's plural, as in its URL: rotatedkeys, configmaps. */
  plural: string;
  /** Absent: every namespace (or a cluster-scoped resource). */
  namespace?: string;
}

/** An object as the API server sends it; each kind reads its own spec and status. */
export interface WatchedObject {
  apiVersion?: string;
  kind?: string;
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec?: unknown;
  status?: unknown;
}

/** One object of a resource, for a status patch or a read. */
export interface ObjectRef {
  resource: WatchedResource;
  namespace?: string;
  name: string;
}

function groupPath(resource: WatchedResource): string {
  return resource.group === '' ? `/api/${resource.version}` : `/apis/${resource.group}/${resource.version}`;
}

/** The URL path of the collection: /apis/G/V[/namespaces/NS]/PLURAL. */
export function collectionPath(resource: WatchedResource, namespace = resource.namespace): string {
  const scope = namespace === undefined ? '' : `/namespaces/${encodeURIComponent(namespace)}`;
  return `${groupPath(resource)}${scope}/${resource.plural}`;
}

/** The URL path of one object. */
export function objectPath(ref: ObjectRef): string {
  return `${collectionPath(ref.resource, ref.namespace ?? ref.resource.namespace)}/${encodeURIComponent(ref.name)}`;
}

/** The key a reflector keeps an object under: `namespace/name`, or `name` when cluster-scoped. */
export function objectKey(object: WatchedObject): string | undefined {
  const name = object.metadata?.name;
  if (name === undefined || name === '') return undefined;
  const namespace = object.metadata?.namespace;
  return namespace === undefined || namespace === '' ? name : `${namespace}/${name}`;
}

/** How logs name the resource: `rotatedkeys.keyroll.io/v1alpha1 in team-a`. */
export function describeResource(resource: WatchedResource): string {
  const name = resource.group === '' ? resource.plural : `${resource.plural}.${resource.group}`;
  return `${name}/${resource.version}${resource.namespace === undefined ? '' : ` in ${resource.namespace}`}`;
}
