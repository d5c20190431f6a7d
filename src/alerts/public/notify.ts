// src/alerts/notify.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { createNotifier } from '../notify.ts';
export type { NoticeResult, Notifier } from '../notify.ts';
