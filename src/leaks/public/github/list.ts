// src/leaks/github/list.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { PageCache } from '../../github/list.ts';
