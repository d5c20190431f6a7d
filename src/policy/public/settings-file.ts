// src/policy/settings-file.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { loadSharedSettings } from '../settings-file.ts';
export type { SharedSettingsFile } from '../settings-file.ts';
