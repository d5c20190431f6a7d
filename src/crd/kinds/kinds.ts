// The four keyroll.io kinds, one table: names, scope, spec and status schemas. The CRD generator
// (src/crd/schema/) and the object reader (`keyroll validate`, the daemon's watch) both read it,
// so a kind's schema is stated once. `Record<KindName, ...>`: a new kind without an entry fails
// the type check.
import { z } from 'zod';
import { API_VERSION, NamespaceName, ObjectName } from './common.ts';
import { ClusterKeyApiSpec } from './key-api.ts';
import { ClusterKeyStoreSpec, KeyStoreSpec } from './key-store.ts';
import { RotatedKeySpec } from './rotated-key.ts';
import { RotatedKeyStatus } from './rotated-key-status.ts';

export const KIND_NAMES = ['RotatedKey', 'KeyStore', 'ClusterKeyStore', 'ClusterKeyApi'] as const;
export type KindName = (typeof KIND_NAMES)[number];

export interface KindInfo {
  plural: string;
  singular: string;
  scope: 'Namespaced' | 'Cluster';
  shortNames: readonly string[];
  spec: z.ZodType;
  /** The status subresource's schema; absent: the kind has no status. */
  status?: z.ZodType;
}

export const KINDS = {
  RotatedKey: {
    plural: 'rotatedkeys',
    singular: 'rotatedkey',
    scope: 'Namespaced',
    shortNames: ['rk'],
    spec: RotatedKeySpec,
    status: RotatedKeyStatus,
  },
  KeyStore: {
    plural: 'keystores',
    singular: 'keystore',
    scope: 'Namespaced',
    shortNames: [],
    spec: KeyStoreSpec,
  },
  ClusterKeyStore: {
    plural: 'clusterkeystores',
    singular: 'clusterkeystore',
    scope: 'Cluster',
    shortNames: [],
    spec: ClusterKeyStoreSpec,
  },
  ClusterKeyApi: {
    plural: 'clusterkeyapis',
    singular: 'clusterkeyapi',
    scope: 'Cluster',
    shortNames: [],
    spec: ClusterKeyApiSpec,
  },
} as const satisfies Record<KindName, KindInfo>;

// What keyroll reads of an object's metadata; the rest (labels, managedFields, ...) passes through.
const Metadata = z.looseObject({
  name: ObjectName,
  namespace: NamespaceName.optional(),
  generation: z.number().int().optional(),
  resourceVersion: z.string().optional(),
  annotations: z.record(z.string(), z.string()).optional(),
});

function objectOf<K extends KindName, S extends z.ZodType>(kind: K, spec: S) {
  return z.looseObject({
    apiVersion: z.literal(API_VERSION),
    kind: z.literal(kind),
    metadata: Metadata,
    spec,
  });
}

/** One keyroll.io object as a manifest or the API server holds it; `status` is not checked here (the leader writes it). */
export const KeyrollObject = z.discriminatedUnion('kind', [
  objectOf('RotatedKey', RotatedKeySpec),
  objectOf('KeyStore', KeyStoreSpec),
  objectOf('ClusterKeyStore', ClusterKeyStoreSpec),
  objectOf('ClusterKeyApi', ClusterKeyApiSpec),
]);
export type KeyrollObject = z.infer<typeof KeyrollObject>;
export type RotatedKeyObject = Extract<KeyrollObject, { kind: 'RotatedKey' }>;
export type KeyStoreObject = Extract<KeyrollObject, { kind: 'KeyStore' }>;
export type ClusterKeyStoreObject = Extract<KeyrollObject, { kind: 'ClusterKeyStore' }>;
export type ClusterKeyApiObject = Extract<KeyrollObject, { kind: 'ClusterKeyApi' }>;
