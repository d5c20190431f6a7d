// src/crd/kinds/common.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { GROUP, VERSION } from '../../kinds/common.ts';
