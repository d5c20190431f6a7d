// src/audit/events.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { AuditContext, AuditLog } from '../events.ts';
