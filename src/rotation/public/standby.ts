// src/rotation/standby.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { readStandbyValue } from '../standby.ts';
export type { StandbyVerdict } from '../standby.ts';
