// The tenancy rules of docs/crds.md ("Tenancy"), each a pure function of the objects and the
// namespaces' labels: which namespace a condition admits, whether a ClusterKeyApi lets a
// namespace rotate an organization's keys (and which key ids), and what a namespaced KeyStore may hold.
import type { ApiCondition } from '../kinds/key-api.ts';
import type { StoreCondition } from '../kinds/key-store.ts';
import type { KeyStoreObject } from '../kinds/kinds.ts';
import type { LabelSelector } from '../kinds/common.ts';
import type { RefusalReason } from './refusal.ts';

export type NamespaceLabels = ReadonlyMap<string, Readonly<Record<string, string>>>;

/** metav1.LabelSelector over `labels`, as Kubernetes reads it: every requirement holds; `{}` selects all. */
export function selects(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!Object.hasOwn(labels, key) || labels[key] !== value) return false;
  }
  for (const requirement of selector.matchExpressions ?? []) {
    const present = Object.hasOwn(labels, requirement.key);
    const value = present ? labels[requirement.key] : undefined;
    const listed = value !== undefined && (requirement.values ?? []).includes(value);
    const holds = {
      In: listed,
      // Kubernetes: NotIn also selects a namespace without the label.
      NotIn: !listed,
      Exists: present,
      DoesNotExist: !present,
    }[requirement.operator];
    if (!holds) return false;
  }
  return true;
}

/** Whether a condition admits `namespace`: listed by name, or selected by its labels (unknown: none). */
export function admits(
  condition: Pick<ApiCondition | StoreCondition, 'namespaces' | 'namespaceSelector'>,
  namespace: string,
  namespaces: NamespaceLabels,
): boolean {
  if (condition.namespaces?.includes(namespace) === true) return true;
  const selector = condition.namespaceSelector;
  return selector !== undefined && selects(selector, namespaces.get(namespace) ?? {});
}

/**
 * Whether a condition's `keyIds` admit the API key id `keyId`: absent, every id; else an exact
 * id, or a pattern `prefix*` the id starts with (and is longer than: `key_*` is not the id `key_`).
 */
export function keyIdAdmitted(keyIds: readonly string[] | undefined, keyId: string): boolean {
  if (keyIds === undefined) return true;
  return keyIds.some((pattern) =>
    pattern.endsWith('*')
      ? keyId.length >= pattern.length && keyId.startsWith(pattern.slice(0, -1))
      : keyId === pattern,
  );
}

export interface KeyStoreVerdict {
  reason: Extract<RefusalReason, 'KeyStoreLocalReference' | 'KeyStoreAmbientIdentity'>;
  message: string;
}

/**
 * Why a namespaced KeyStore cannot be used, or undefined when it can. Every reference a backend
 * takes (`env:`, `file:`, `caFile`, Vault's `jwtFile`, a file backend's `directory`) is read in
 * keyroll's own pod, and every backend without one acts with keyroll's own identity (the pod's
 * AWS role; Vault's kubernetes login sends keyroll's service-account token to the address the
 * store names). The reference types (src/refs/) have no "Secret in the tenant's namespace" form,
 * so a tenant can give no credential of its own: a KeyStore outside keyroll's namespace (which
 * only the platform team writes) is refused whatever it holds. ClusterKeyStores are the
 * platform's and confine tenants by their conditions' path prefixes.
 */
export function keyStoreVerdict(
  store: KeyStoreObject,
  keyrollNamespace: string,
): KeyStoreVerdict | undefined {
  if (store.metadata.namespace === keyrollNamespace) return undefined;
  const spec = store.spec;
  const local = (field: string, what: string): KeyStoreVerdict => ({
    reason: 'KeyStoreLocalReference',
    message: `a KeyStore's ${field} would ${what} in keyroll's own pod; a team's KeyStore may not hold one: use a ClusterKeyStore the platform team admits the namespace to`,
  });
  switch (spec.kind) {
    case 'file':
      return local('directory', 'name a directory');
    case 'vault':
      if (spec.caFile !== undefined) return local('caFile', 'name a file');
      if (spec.auth.method === 'token') return local('auth.token', 'be read');
      if (spec.auth.method === 'approle') return local('auth.secretId', 'be read');
      return local('auth.jwtFile', "name a file (by default keyroll's own service-account token)");
    case 'aws':
      return {
        reason: 'KeyStoreAmbientIdentity',
        message:
          "an aws KeyStore writes with keyroll's own AWS identity to any secret name, with no prefix to keep it to the team's: use a ClusterKeyStore the platform team admits the namespace to",
      };
  }
}
