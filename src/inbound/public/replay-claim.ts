// src/inbound/replay-claim.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { claimOrRefuse } from '../replay-claim.ts';
export type { ReplayRecord } from '../replay-claim.ts';
