// The files `npm run monitoring:generate` writes, by path from the repository root.
// test/monitoring/generated.test.ts fails when a committed one differs from what this makes.
import { dashboardText } from './dashboard.ts';
import { ruleFileText } from './rules.ts';

export const PLAIN_RULES_FILE = 'config/prometheus-rules.yaml';
export const CHART_RULES_FILE = 'helm/keyroll/monitoring/prometheus-rules.yaml';
export const CHART_DASHBOARD_FILE = 'helm/keyroll/monitoring/grafana-dashboard.json';

export function monitoringFiles(): Record<string, string> {
  const rules = ruleFileText();
  // The same text twice: the chart can only read files inside itself.
  return { [PLAIN_RULES_FILE]: rules, [CHART_RULES_FILE]: rules, [CHART_DASHBOARD_FILE]: dashboardText() };
}
