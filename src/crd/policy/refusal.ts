// Why keyroll leaves a keyroll.io object out of the policy it builds from the objects. Each
// refusal becomes, in the status slice, a `Ready=False` condition with `reason` on the object
// and an audit event; so the reason is a stable CamelCase word, and the message says what to
// change without naming another tenant's objects or ever carrying a secret.

export const REFUSAL_REASONS = [
  'ApiNotFound',
  'ApiNotServed',
  'ConsumerOutsideNamespace',
  'InvalidSpec',
  'KeyIdInUse',
  'KeyIdNotAdmitted',
  'KeyStoreAmbientIdentity',
  'KeyStoreLocalReference',
  'KeyStoreRefused',
  'OrganizationNotAdmitted',
  'PathInUse',
  'PathNotCanonical',
  'PathOutsidePrefix',
  'PolicyConflict',
  'StoreNotAdmitted',
  'StoreNotFound',
] as const;
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

export interface ObjectRef {
  kind: 'RotatedKey' | 'KeyStore' | 'ClusterKeyStore' | 'ClusterKeyApi';
  /** Absent for the cluster-scoped kinds. */
  namespace?: string;
  name: string;
}

export interface Refusal {
  object: ObjectRef;
  reason: RefusalReason;
  message: string;
}

/** `namespace/name`, or `name` for a cluster-scoped object: how maps and messages name an object. */
export function refName(ref: { namespace?: string | undefined; name: string }): string {
  return ref.namespace === undefined ? ref.name : `${ref.namespace}/${ref.name}`;
}
