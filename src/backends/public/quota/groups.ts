// src/backends/quota/groups.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { QUOTA_GROUPS } from '../../quota/groups.ts';
