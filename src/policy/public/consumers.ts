// src/policy/consumers.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { CONSUMER_DEFAULTS, ConsumerInput, consumerName } from '../consumers.ts';
export type {
  ConsumerRef,
  ConsumerSettings,
  KubeConsumerKind,
  KubeConsumerRef,
  RestartWindow,
  WebhookConsumerRef,
  WorkloadKind,
} from '../consumers.ts';
