// src/consumers/create.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { createRefresher } from '../create.ts';
