// src/rotation/lock-owner.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { parsePodLockOwner, podIdentityOf } from '../lock-owner.ts';
export type { PodLockOwner } from '../lock-owner.ts';
