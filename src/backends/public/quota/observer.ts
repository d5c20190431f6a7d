// src/backends/quota/observer.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { QuotaDeps, QuotaObserver } from '../../quota/observer.ts';
