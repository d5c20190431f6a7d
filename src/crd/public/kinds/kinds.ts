// src/crd/kinds/kinds.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { KeyrollObject, KINDS, KIND_NAMES } from '../../kinds/kinds.ts';
export type { KindName } from '../../kinds/kinds.ts';
