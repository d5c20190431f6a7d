// src/rotation/key-alert.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { sendAlert } from '../key-alert.ts';
