// src/audit/trace-ids.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { setTraceIdsSource } from '../trace-ids.ts';
