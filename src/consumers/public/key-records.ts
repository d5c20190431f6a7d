// src/consumers/key-records.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { keyRecordsOf } from '../key-records.ts';
