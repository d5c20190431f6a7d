// src/scheduler/launcher.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { Launcher } from '../launcher.ts';
