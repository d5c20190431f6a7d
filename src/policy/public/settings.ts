// src/policy/settings.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { BUILTIN_DEFAULTS } from '../settings.ts';
