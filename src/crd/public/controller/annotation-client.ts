// src/crd/controller/annotation-client.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { KubeAnnotationClient } from '../../controller/annotation-client.ts';
export type { AnnotationRequests } from '../../controller/annotation-client.ts';
