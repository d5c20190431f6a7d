// The dashboard and the alert rules as shipped: the committed files are what src/monitoring/
// generates (the plain rules file and the chart's copy therefore never differ), every runbook link
// lands on a heading of docs/runbook.md, every alert has a promtool unit test that makes it fire and
// one where it must not, and docs/metrics.md lists every alert and shows the dashboard.
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { dashboardObject, DASHBOARD_ROWS } from '../../src/monitoring/dashboard.ts';
import { CHART_RULES_FILE, monitoringFiles, PLAIN_RULES_FILE } from '../../src/monitoring/files.ts';
import { headingAnchor, RULE_GROUPS } from '../../src/monitoring/rules.ts';

const read = (path: string): Promise<string> => readFile(new URL(`../../${path}`, import.meta.url), 'utf8');
const alerts = RULE_GROUPS.flatMap((group) => group.rules);

describe('the generated monitoring files', () => {
  it('are what src/monitoring generates now (run `npm run monitoring:generate` after changing it)', async () => {
    for (const [path, text] of Object.entries(monitoringFiles())) expect(await read(path), path).toBe(text);
    expect(await read(CHART_RULES_FILE)).toBe(await read(PLAIN_RULES_FILE));
  });

  it('give every alert a summary, a severity and a runbook link to a heading of docs/runbook.md', async () => {
    const runbook = await read('docs/runbook.md');
    const anchors = new Set(
      [...runbook.matchAll(/^#{2,4} (.+)$/gm)].map((match) => headingAnchor(match[1] ?? '')),
    );
    const file = parse(await read(PLAIN_RULES_FILE)) as {
      groups: {
        rules: { alert: string; labels: { severity: string }; annotations: Record<string, string> }[];
      }[];
    };
    const rules = file.groups.flatMap((group) => group.rules);
    expect(rules.map((rule) => rule.alert)).toEqual(alerts.map((rule) => rule.alert));
    for (const rule of rules) {
      expect(rule.annotations.summary, rule.alert).toBeTruthy();
      expect(['critical', 'warning'], rule.alert).toContain(rule.labels.severity);
      const anchor = /^docs\/runbook\.md#(.+)$/.exec(rule.annotations.runbook_url ?? '')?.[1];
      expect(anchors.has(anchor ?? ''), `${rule.alert}: ${rule.annotations.runbook_url}`).toBe(true);
    }
  });

  it('have a promtool unit test per alert that makes it fire, and a time where it must not', async () => {
    const tests = parse(await read('helm/tests/prometheus-rules.test.yaml')) as {
      tests: { alert_rule_test: { alertname: string; exp_alerts: unknown[] }[] }[];
    };
    const cases = tests.tests.flatMap((test) => test.alert_rule_test);
    for (const { alert } of alerts) {
      expect(
        cases.some((c) => c.alertname === alert && c.exp_alerts.length > 0),
        `${alert} fires somewhere`,
      ).toBe(true);
      expect(
        cases.some((c) => c.alertname === alert && c.exp_alerts.length === 0),
        `${alert} stays quiet somewhere`,
      ).toBe(true);
    }
  });

  it('lay the dashboard out without overlaps, every panel with a description and a query', () => {
    const panels = (
      dashboardObject() as {
        panels: {
          type: string;
          description?: string;
          targets?: unknown[];
          gridPos: { x: number; y: number; w: number; h: number };
        }[];
      }
    ).panels;
    const cells = new Set<string>();
    for (const panel of panels) {
      for (let x = panel.gridPos.x; x < panel.gridPos.x + panel.gridPos.w; x++) {
        for (let y = panel.gridPos.y; y < panel.gridPos.y + panel.gridPos.h; y++) {
          expect(cells.has(`${x},${y}`), `overlap at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
      }
      if (panel.type === 'row') continue;
      expect(panel.description).toBeTruthy();
      expect(panel.targets?.length).toBeGreaterThan(0);
    }
    expect(panels.filter((panel) => panel.type === 'row')).toHaveLength(DASHBOARD_ROWS.length);
  });

  it('are described in docs/metrics.md: every alert, and the picture of the dashboard', async () => {
    const doc = await read('docs/metrics.md');
    for (const { alert } of alerts) expect(doc, alert).toContain(`\`${alert}\``);
    expect(doc).toContain('](images/dashboard.png)');
    await expect(readFile(new URL('../../docs/images/dashboard.png', import.meta.url))).resolves.toBeTruthy();
  });
});
