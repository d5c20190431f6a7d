// src/daemon/objects-observer.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { ObjectsObserver } from '../objects-observer.ts';
