// src/leader/lock-owner.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { lockOwnerOf, podIdentityOf } from '../lock-owner.ts';
