// src/inbound/rejection-audit.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { DEFAULT_REJECTIONS_AUDITED_PER_MINUTE, RejectionAudit } from '../rejection-audit.ts';
