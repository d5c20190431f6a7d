// src/crd/watch/resource.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { WatchedObject, WatchedResource } from '../../watch/resource.ts';
