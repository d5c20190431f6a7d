// src/crd/controller/reporter.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { StatusReporter } from '../../controller/reporter.ts';
export type { GenerationRefusal, ReporterCounts, StatusReporterOptions } from '../../controller/reporter.ts';
