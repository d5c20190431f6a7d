// src/scheduler/key-locks.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { KeyLocks } from '../key-locks.ts';
