// src/crd/controller/key-facts.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { ConsumersReport } from '../../controller/key-facts.ts';
