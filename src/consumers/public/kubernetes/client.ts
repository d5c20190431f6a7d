// src/consumers/kubernetes/client.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { KubeClient } from '../../kubernetes/client.ts';
