// src/consumers/kubernetes/node-client.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../../kubernetes/node-client.ts';
