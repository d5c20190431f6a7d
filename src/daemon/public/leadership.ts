// src/daemon/leadership.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { LeaderElectionOptions } from '../leadership.ts';
