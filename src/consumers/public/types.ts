// src/consumers/types.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { CONSUMER_KINDS, CONSUMER_RESULTS } from '../types.ts';
export type { ConsumerObserver, DeliveryReport } from '../types.ts';
