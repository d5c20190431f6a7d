// src/rotation/emergency-estimate.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../emergency-estimate.ts';
