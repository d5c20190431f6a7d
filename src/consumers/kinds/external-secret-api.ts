// Which version of external-secrets.io keyroll speaks to a cluster, found by discovery rather than
// assumed: external-secrets serves `v1beta1` only up to v0.15, both from v0.16.0, and `v1` only
// from v0.17.0. The fields keyroll reads and writes are the same in both (metadata.annotations
// force-sync; spec.refreshInterval, spec.refreshPolicy from v0.16; status.refreshTime,
// status.syncedResourceVersion, status.conditions[Ready]), so one version is enough, and v1 is
// preferred where both are served. Assuming v1 made every request to a v0.14/v0.15 cluster a 404,
// reported as a missing object.
import { ConsumerError } from '../errors.ts';
import type { KubeClient, KubeObjectRef } from '../kubernetes/client.ts';

export const EXTERNAL_SECRETS_GROUP = 'external-secrets.io';
export const EXTERNAL_SECRETS_PLURAL = 'externalsecrets';
/** What keyroll speaks, preferred first. */
export const EXTERNAL_SECRET_VERSIONS = ['v1', 'v1beta1'] as const;
export type ExternalSecretVersion = (typeof EXTERNAL_SECRET_VERSIONS)[number];

/** The release each version needs, for messages and docs. */
export const EXTERNAL_SECRETS_RELEASES =
  'external-secrets v0.14 or later (v0.14–v0.16 serve external-secrets.io/v1beta1, v0.16 and later v1)';

export function externalSecretRef(
  version: ExternalSecretVersion,
  namespace: string,
  name: string,
): KubeObjectRef {
  return { group: EXTERNAL_SECRETS_GROUP, version, plural: EXTERNAL_SECRETS_PLURAL, namespace, name };
}

/**
 * The version to speak: v1 where served, else v1beta1. Throws ConsumerError
 * KR_CONSUMER_API_UNSERVED (naming the release needed) when neither is, or the discovery's own
 * failure (unreachable, unauthorized).
 */
export async function discoverExternalSecretVersion(
  client: KubeClient,
  signal?: AbortSignal,
): Promise<ExternalSecretVersion> {
  const served = await client.servedVersions(EXTERNAL_SECRETS_GROUP, signal);
  const spoken = EXTERNAL_SECRET_VERSIONS.find((version) => served.includes(version));
  if (spoken !== undefined) return spoken;
  const what =
    served.length === 0
      ? `the API server does not serve ${EXTERNAL_SECRETS_GROUP} (external-secrets is not installed)`
      : `the API server serves ${EXTERNAL_SECRETS_GROUP} ${served.join(', ')} only`;
  throw new ConsumerError(
    'KR_CONSUMER_API_UNSERVED',
    `${what}; keyroll speaks ${EXTERNAL_SECRET_VERSIONS.join(' and ')}: install or upgrade to ${EXTERNAL_SECRETS_RELEASES}`,
  );
}

/**
 * Discovery once per delivery (a run, a sweep, a status, a validate): the first call asks the API
 * server, later calls share its answer. A failure that may pass (unreachable) is not kept.
 */
export class ExternalSecretApi {
  readonly #client: KubeClient;
  #version: Promise<ExternalSecretVersion> | undefined;

  constructor(client: KubeClient) {
    this.#client = client;
  }

  version(signal?: AbortSignal): Promise<ExternalSecretVersion> {
    const asked = (this.#version ??= discoverExternalSecretVersion(this.#client, signal));
    asked.catch((error: unknown) => {
      if (error instanceof ConsumerError && error.retryable && this.#version === asked)
        this.#version = undefined;
    });
    return asked;
  }

  async ref(namespace: string, name: string, signal?: AbortSignal): Promise<KubeObjectRef> {
    return externalSecretRef(await this.version(signal), namespace, name);
  }
}
