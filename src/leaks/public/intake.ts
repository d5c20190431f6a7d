// src/leaks/intake.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { LeakIntake, type LeakRotator } from '../intake.ts';
