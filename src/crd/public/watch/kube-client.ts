// src/crd/watch/kube-client.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { KubeResourceClient } from '../../watch/kube-client.ts';
export type { WatchRequests } from '../../watch/kube-client.ts';
