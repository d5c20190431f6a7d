// src/rotation/key-lock.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { releaseKeyLock, takeKeyLock, underKeyLock } from '../key-lock.ts';
