// src/audit/printable.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { printable, printableJson, printableLines, terminalLine } from '../printable.ts';
