// src/rotation/slots.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { activeSlot, standbySlot } from '../slots.ts';
