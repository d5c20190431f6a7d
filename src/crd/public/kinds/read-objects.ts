// src/crd/kinds/read-objects.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { readObjectDirectory } from '../../kinds/read-objects.ts';
export type { ObjectDirectory, ObjectIssue } from '../../kinds/read-objects.ts';
