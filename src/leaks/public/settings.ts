// src/leaks/settings.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { intakeEnabled, resolveIntake } from '../settings.ts';
export type { IntakeRuntime } from '../settings.ts';
