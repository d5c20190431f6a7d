// src/emulator/server.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export * from '../server.ts';
