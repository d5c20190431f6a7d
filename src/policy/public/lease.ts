// src/policy/lease.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { leaseNeededMs, writeTimeoutOf } from '../lease.ts';
