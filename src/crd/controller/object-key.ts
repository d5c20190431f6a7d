// How the controller names a RotatedKey: `namespace/name`, the reflector's key and the daemon's.
import type { ObjectRef, WatchedResource } from '../watch/resource.ts';

export function splitKey(object: string): [string, string] {
  const slash = object.indexOf('/');
  return slash < 0 ? ['', object] : [object.slice(0, slash), object.slice(slash + 1)];
}

export function objectRef(resource: WatchedResource, object: string): ObjectRef {
  const [namespace, name] = splitKey(object);
  return { resource, namespace, name };
}
