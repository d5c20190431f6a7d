// src/metrics/pushgateway.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { PushOptions } from '../pushgateway.ts';
