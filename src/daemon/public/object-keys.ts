// src/daemon/object-keys.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { KeysFromObjects } from '../object-keys.ts';
