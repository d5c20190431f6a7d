// src/leaks/intake.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { LeakIntake } from '../intake.ts';
export type { LeakRotator } from '../intake.ts';
