// src/crd/watch/reflector.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { Reflector } from '../../watch/reflector.ts';
export type { WatchChange } from '../../watch/reflector.ts';
