// Narrow views of the policy's consumer references, and one string per consumer for maps.
import type { ConsumerRef, KubeConsumerRef, WorkloadKind } from '../policy/public/consumers.ts';

export type {
  ConsumerRef,
  KubeConsumerRef,
  WebhookConsumerRef,
  WorkloadKind,
} from '../policy/public/consumers.ts';
export { consumerName } from '../policy/public/consumers.ts';

export type ExternalSecretConsumer = KubeConsumerRef & { kind: 'externalSecret' };
export type VaultStaticSecretConsumer = KubeConsumerRef & { kind: 'vaultStaticSecret' };
/** A consumer that copies the stored value into a Kubernetes Secret when asked: synced before any workload restarts. */
export type SyncingConsumer = ExternalSecretConsumer | VaultStaticSecretConsumer;
export type WorkloadConsumer = KubeConsumerRef & { kind: WorkloadKind };

export function isExternalSecret(consumer: ConsumerRef): consumer is ExternalSecretConsumer {
  return consumer.kind === 'externalSecret';
}

export function isVaultStaticSecret(consumer: ConsumerRef): consumer is VaultStaticSecretConsumer {
  return consumer.kind === 'vaultStaticSecret';
}

export function isSyncing(consumer: ConsumerRef): consumer is SyncingConsumer {
  return isExternalSecret(consumer) || isVaultStaticSecret(consumer);
}

export function isWorkload(consumer: ConsumerRef): consumer is WorkloadConsumer {
  return consumer.kind === 'deployment' || consumer.kind === 'statefulSet' || consumer.kind === 'daemonSet';
}

/** One string per consumer: kind, namespace and name (or the sink). */
export function consumerKey(consumer: ConsumerRef): string {
  return consumer.kind === 'webhook'
    ? `webhook\u0000${consumer.sink}`
    : `${consumer.kind}\u0000${consumer.namespace}\u0000${consumer.name}`;
}
