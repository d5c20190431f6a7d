// The small part of the Kubernetes API keyroll needs to refresh consumers: read one object, patch
// one object, watch one object; and, to know what it may do before it acts, the API versions a
// group serves (discovery) and whether its own identity may use a verb on an object
// (SelfSubjectAccessReview). Everything in consumers/ talks to this interface; node-client.ts
// implements it with @kubernetes/client-node, and the Role the chart renders allows exactly the
// first three verbs on the objects the policy names (docs/kubernetes.md); discovery and the
// access review are open to every authenticated identity (system:discovery, system:basic-user).

/** One namespaced object of an API group (core objects are never consumers). */
export interface KubeObjectRef {
  group: string;
  version: string;
  /** The resource's plural, as in its URL: deployments, externalsecrets. */
  plural: string;
  namespace: string;
  name: string;
}

/** What keyroll reads of any object; each kind reads its own `spec` and `status` (tolerantly). */
export interface KubeObject {
  metadata?: {
    name?: string;
    namespace?: string;
    resourceVersion?: string;
    generation?: number;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  spec?: unknown;
  status?: unknown;
}

/** JSON merge patch (what `kubectl annotate` sends), or strategic merge patch (`kubectl rollout restart`). */
export type PatchType = 'merge' | 'strategic';

export interface KubeClient {
  /** Reads the object. Throws ConsumerError (not found, forbidden, unreachable, timeout). */
  get(ref: KubeObjectRef, signal?: AbortSignal): Promise<KubeObject>;
  /**
   * Patches the object and returns it as stored. A patch carrying `metadata.resourceVersion`
   * lands only on that version (409 otherwise: ConsumerError KR_CONSUMER_CONFLICT).
   */
  patch(ref: KubeObjectRef, patch: object, type: PatchType, signal?: AbortSignal): Promise<KubeObject>;
  /**
   * Watches the one object (a field selector on its name, which a Role's resourceNames allows)
   * from `resourceVersion`, calling `onChange` with each new state. Resolves when the watch ends:
   * the server closed it, or `signal` aborted. Throws ConsumerError when it cannot start.
   */
  watch(
    ref: KubeObjectRef,
    resourceVersion: string,
    onChange: (object: KubeObject) => void,
    signal: AbortSignal,
  ): Promise<void>;
  /**
   * The versions the API server serves of `group` (discovery), preferred first; empty when it
   * serves none (the group's CRDs are not installed). Throws ConsumerError.
   */
  servedVersions(group: string, signal?: AbortSignal): Promise<string[]>;
  /** Whether keyroll's own identity may `verb` the object (SelfSubjectAccessReview). Throws ConsumerError. */
  mayI(verb: KubeVerb, ref: KubeObjectRef, signal?: AbortSignal): Promise<AccessAnswer>;
}

/** The verbs keyroll uses on a consumer. */
export type KubeVerb = 'get' | 'patch' | 'watch';

export interface AccessAnswer {
  allowed: boolean;
  /** The authorizer's reason, when it gave one. */
  reason?: string;
}

/** The URL path of an object, for messages and the commands keyroll suggests. */
export function objectPath(ref: KubeObjectRef): string {
  return `/apis/${ref.group}/${ref.version}/namespaces/${ref.namespace}/${ref.plural}/${ref.name}`;
}
