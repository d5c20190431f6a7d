// `keyroll validate`'s look at each Kubernetes consumer, live, before any rotation needs it: the
// cluster serves a version of external-secrets.io keyroll speaks, keyroll's own identity may use
// the verbs a refresh needs (SelfSubjectAccessReview, no change made), the object exists, and an
// ExternalSecret's refresh settings let force-sync work. Otherwise the first sign would be a leak
// rotation whose consumers were not refreshed.
import type { KeyPolicy } from '../policy/public/schema.ts';
import { asConsumerError, ConsumerError } from './errors.ts';
import { ExternalSecretApi } from './kinds/external-secret-api.ts';
import { forceSyncOff } from './kinds/external-secret-refresh.ts';
import { refreshAfterOf, syncUnprovable, vaultStaticSecretRef } from './kinds/vault-static-secret.ts';
import { workloadRef } from './kinds/workloads.ts';
import type { KubeClient, KubeObjectRef, KubeVerb } from './kubernetes/client.ts';
import {
  consumerKey,
  consumerName,
  isExternalSecret,
  isVaultStaticSecret,
  isWorkload,
  type KubeConsumerRef,
} from './refs.ts';

export interface ConsumerCheck {
  /** e.g. "externalSecret shop/billing-api-key". */
  consumer: string;
  keyIds: string[];
  ok: boolean;
  detail: string;
  errorCode?: string;
  /** A failure that may pass by itself (the API server unreachable, a timeout), not a setting to fix. */
  transient?: boolean;
}

/** The verbs a refresh needs (watch is optional: keyroll polls without it). */
const NEEDED: readonly KubeVerb[] = ['get', 'patch'];

/** Every Kubernetes consumer `keys` list, once each, checked live. */
export async function checkConsumers(
  keys: readonly KeyPolicy[],
  client: KubeClient,
  signal?: AbortSignal,
): Promise<ConsumerCheck[]> {
  const consumers = new Map<string, { consumer: KubeConsumerRef; keyIds: string[] }>();
  for (const key of keys) {
    for (const consumer of key.consumers ?? []) {
      if (consumer.kind === 'webhook') continue;
      const entry = consumers.get(consumerKey(consumer)) ?? { consumer, keyIds: [] };
      entry.keyIds.push(key.id);
      consumers.set(consumerKey(consumer), entry);
    }
  }
  const externalSecrets = new ExternalSecretApi(client);
  const checks: ConsumerCheck[] = [];
  // One at a time: a validate is not in a hurry, and the API server's answers stay in order.
  for (const { consumer, keyIds } of consumers.values()) {
    const name = consumerName(consumer);
    try {
      checks.push({
        consumer: name,
        keyIds,
        ok: true,
        detail: await checkOne(client, externalSecrets, consumer, signal),
      });
    } catch (error) {
      const failure = asConsumerError(error);
      checks.push({
        consumer: name,
        keyIds,
        ok: false,
        detail: failure.message,
        errorCode: failure.code,
        ...(failure.retryable || failure.code === 'KR_CONSUMER_TIMEOUT' ? { transient: true } : {}),
      });
    }
  }
  return checks;
}

/** What was found, as a sentence; throws ConsumerError naming what is wrong and the fix. */
async function checkOne(
  client: KubeClient,
  externalSecrets: ExternalSecretApi,
  consumer: KubeConsumerRef,
  signal: AbortSignal | undefined,
): Promise<string> {
  let ref: KubeObjectRef;
  if (isExternalSecret(consumer)) ref = await externalSecrets.ref(consumer.namespace, consumer.name, signal);
  else if (isVaultStaticSecret(consumer)) ref = vaultStaticSecretRef(consumer.namespace, consumer.name);
  else if (isWorkload(consumer)) ref = workloadRef(consumer.kind, consumer.namespace, consumer.name);
  else
    throw new ConsumerError(
      'KR_CONSUMER_REFUSED',
      `keyroll does not refresh consumers of kind ${consumer.kind}`,
    );
  const answers = await Promise.all(
    (['get', 'patch', 'watch'] as const).map(async (verb) => ({
      verb,
      ...(await client.mayI(verb, ref, signal)),
    })),
  );
  const denied = answers
    .filter((answer) => !answer.allowed && NEEDED.includes(answer.verb))
    .map((answer) => answer.verb);
  if (denied.length > 0) {
    throw new ConsumerError(
      'KR_CONSUMER_FORBIDDEN',
      `keyroll may not ${denied.join(' or ')} ${ref.plural} ${ref.namespace}/${ref.name}: add it to the chart's consumerAccess (get, patch and watch)`,
    );
  }
  const object = await client.get(ref, signal);
  const access = answers.every((answer) => answer.allowed)
    ? 'get, patch and watch allowed'
    : 'get and patch allowed (no watch: keyroll polls every 2 s)';
  if (isVaultStaticSecret(consumer)) {
    const unprovable = syncUnprovable(object);
    if (unprovable !== undefined) throw unprovable;
    // keyroll's annotation makes the operator sync at once: refreshAfter is only its own period.
    const after = refreshAfterOf(object);
    return `exists; ${access}; sync-now works (hmacSecretData)${after === undefined ? '' : ` (refreshAfter ${after}, not waited for)`}`;
  }
  if (!isExternalSecret(consumer)) return `exists; ${access}`;
  const off = forceSyncOff(object);
  if (off !== undefined) throw off;
  const spec = (object.spec ?? {}) as { refreshInterval?: unknown; refreshPolicy?: unknown };
  const refresh = [
    typeof spec.refreshPolicy === 'string' ? `refreshPolicy ${spec.refreshPolicy}` : undefined,
    typeof spec.refreshInterval === 'string' ? `refreshInterval ${spec.refreshInterval}` : undefined,
  ].filter((part) => part !== undefined);
  return `exists (${ref.group}/${ref.version}); ${access}; force-sync works${refresh.length === 0 ? '' : ` (${refresh.join(', ')})`}`;
}
