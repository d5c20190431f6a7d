// src/audit/harden.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { keepProcessMemoryPrivate } from '../harden.ts';
