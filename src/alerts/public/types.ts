// src/alerts/types.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { Alert, AlertResult, AlertSeverity, Alerter, NoticeStage, SuccessNotice } from '../types.ts';
