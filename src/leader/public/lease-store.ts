// src/leader/lease-store.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { LeaseStore } from '../lease-store.ts';
