// src/rotation/trusted-state.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { readTrustedState } from '../trusted-state.ts';
