// src/policy/intake.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { reconcileScopes } from '../intake.ts';
export type { GithubIntake } from '../intake.ts';
