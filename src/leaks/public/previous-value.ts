// src/leaks/previous-value.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { needsLeakRotation } from '../previous-value.ts';
