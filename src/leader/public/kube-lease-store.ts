// src/leader/kube-lease-store.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../kube-lease-store.ts';
