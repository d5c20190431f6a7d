// src/daemon/replay-store.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../replay-store.ts';
