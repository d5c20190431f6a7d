// external-secrets' own record of which state of an ExternalSecret its last sync read:
// `status.syncedResourceVersion`, written in the same status update as `refreshTime` and
// `Ready: True` (markAsDone), never by a failed sync. Its value is
//
//   fmt.Sprintf("%d-%s", meta.GetGeneration(), HashMeta(meta))
//   HashMeta(m) = ObjectHash(struct{ annotations, labels map[string]string }{m.Annotations, m.Labels})
//   ObjectHash(o) = hex(md5(fmt.Sprintf("%+v", o)))          up to v0.16.1
//                 = hex(sha3.Sum224(fmt.Sprintf("%+v", o)))   from v0.16.2
//
// (pkg/controllers/util/util.go GetResourceVersion / HashMeta and pkg/utils/utils.go ObjectHash,
// the same formula from v0.14.0 to v2.9.0; before v0.14 it lived in the ExternalSecret controller
// as getResourceVersion / hashMeta.) The metadata is the one the reconcile read before it fetched
// from the provider, and the status update carries that read's resourceVersion, so it fails (409,
// and the reconcile runs again) if the object changed in between. A status whose
// syncedResourceVersion is the value of the object's current metadata therefore proves a sync that
// read the metadata as it is now: after keyroll's force-sync patch, when that patch's annotation
// value is still there. That needs no clock, where refreshTime (whole seconds) needs a later second.
import { createHash } from 'node:crypto';
import type { KubeObject } from '../kubernetes/client.ts';

/** Go's `%+v` of a map[string]string: `map[k1:v1 k2:v2]`, keys in byte order, a nil map as `map[]`. */
export function goMapString(map: Readonly<Record<string, string>> | undefined): string {
  const keys = Object.keys(map ?? {}).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  return `map[${keys.map((key) => `${key}:${map?.[key] ?? ''}`).join(' ')}]`;
}

/** Go's `%+v` of HashMeta's struct: `{annotations:map[…] labels:map[…]}`. */
export function metaString(object: KubeObject): string {
  return `{annotations:${goMapString(object.metadata?.annotations)} labels:${goMapString(object.metadata?.labels)}}`;
}

/**
 * The syncedResourceVersion external-secrets writes after a sync that read this state of the
 * object, by each hash it has used: md5 (up to v0.16.1) and sha3-224 (v0.16.2 on). Undefined
 * without a generation (the API server always sets it).
 */
export function syncedResourceVersions(object: KubeObject): { md5: string; sha3: string } | undefined {
  const generation = object.metadata?.generation;
  if (typeof generation !== 'number') return undefined;
  const text = metaString(object);
  return {
    md5: `${String(generation)}-${createHash('md5').update(text, 'utf8').digest('hex')}`,
    sha3: `${String(generation)}-${createHash('sha3-224').update(text, 'utf8').digest('hex')}`,
  };
}

/** Whether the status's syncedResourceVersion is external-secrets' value for the object's metadata as it is now. */
export function syncedThisState(object: KubeObject): boolean {
  const synced = (object.status as { syncedResourceVersion?: unknown } | undefined)?.syncedResourceVersion;
  if (typeof synced !== 'string' || synced === '') return false;
  const expected = syncedResourceVersions(object);
  return expected !== undefined && (synced === expected.md5 || synced === expected.sha3);
}
