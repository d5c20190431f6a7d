// Writes the alert rules (config/prometheus-rules.yaml and the chart's copy) and the Grafana
// dashboard (helm/keyroll/monitoring/grafana-dashboard.json) from src/monitoring/
// (`npm run monitoring:generate`). test/monitoring/generated.test.ts fails when they are stale.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { monitoringFiles } from '../src/monitoring/files.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
for (const [path, text] of Object.entries(monitoringFiles())) {
  const target = `${root}${path}`;
  await mkdir(dirname(target), { recursive: true });
  await writeFile(target, text);
  console.log(`wrote ${path}`);
}
