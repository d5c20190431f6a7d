// src/consumers/report.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { consumersSummaryPart, runConsumersReport } from '../report.ts';
export type { RunConsumersReport } from '../report.ts';
