// The metric cross-check: every query of the Grafana dashboard and every alert rule expression may
// name only metrics and labels keyroll really exports, taken from a real /metrics scrape of a
// running daemon (with the metrics token, after a rotation, a failure and an alert) and from the
// push of a real `keyroll run --pushgateway` (with the grouping labels of its URL), plus the outside
// series rules.ts EXTERNAL_SERIES documents and the labels Prometheus adds to a target. A query
// that names a metric or label nobody exports would show an empty panel or never fire.
import { readFile } from 'node:fs/promises';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dashboardQueries } from '../../src/monitoring/dashboard.ts';
import { EXTERNAL_SERIES, RULE_GROUPS } from '../../src/monitoring/rules.ts';
import { startReceiver, type Receiver } from '../support/alert-receiver.ts';
import { useCliFixture } from '../cli/harness.ts';
import {
  keyYaml,
  METRICS_TOKEN,
  policyYaml,
  startDaemonBench,
  type DaemonBench,
} from '../support/daemon-bench.ts';
import { exportedNames, promqlNames } from './promql-names.ts';

/** Labels every scraped series gets from Prometheus (job, instance) and a ServiceMonitor's relabelling. */
const TARGET_LABELS = ['job', 'instance', 'namespace', 'pod', 'service', 'container', 'endpoint'] as const;

type Exported = Map<string, Set<string>>;

/** What is wrong with one expression, against what is exported; empty when nothing. */
export function namingProblems(expr: string, exported: Exported): string[] {
  const problems: string[] = [];
  let names;
  try {
    names = promqlNames(expr);
  } catch (error) {
    return [String(error)];
  }
  const known = new Set<string>(TARGET_LABELS);
  for (const { metric, labels } of names.selectors) {
    const external = EXTERNAL_SERIES[metric];
    const metricLabels = exported.get(metric) ?? (external ? new Set(external.labels) : undefined);
    if (metricLabels === undefined) {
      problems.push(`${metric}: no such metric is exported`);
      continue;
    }
    for (const label of metricLabels) known.add(label);
    for (const label of labels) {
      if (
        !metricLabels.has(label) &&
        !(external === undefined && (TARGET_LABELS as readonly string[]).includes(label))
      )
        problems.push(`${metric}{${label}}: ${metric} has no label ${label}`);
    }
  }
  for (const label of names.groupingLabels)
    if (!known.has(label)) problems.push(`by/on (${label}): no metric of the expression has label ${label}`);
  return problems;
}

function merge(into: Exported, from: Exported): void {
  for (const [metric, labels] of from) {
    const have = into.get(metric) ?? new Set<string>();
    for (const label of labels) have.add(label);
    into.set(metric, have);
  }
}

/** Grouping labels of a push, from its path: /metrics/job/keyroll/command/run/shard/0-of-1. */
function groupingLabels(path: string): string[] {
  const segments = path.replace(/^\/metrics\//, '').split('/');
  return segments.filter((_, index) => index % 2 === 0).map((name) => name.replace(/@base64$/, ''));
}

const everyExpression = (): { where: string; expr: string }[] => [
  ...dashboardQueries().map(({ panel, expr }) => ({ where: `dashboard panel "${panel}"`, expr })),
  ...RULE_GROUPS.flatMap((group) =>
    group.rules.map((rule) => ({ where: `rule ${rule.alert}`, expr: rule.expr })),
  ),
];

describe('the metric cross-check', () => {
  const cli = useCliFixture();
  let bench: DaemonBench;
  let alerts: Receiver;
  let gateway: Receiver;
  beforeEach(async () => {
    bench = await startDaemonBench();
    alerts = await startReceiver();
    gateway = await startReceiver();
  });
  afterEach(async () => {
    await bench.close();
    await alerts.close();
    await gateway.close();
  });

  async function daemonScrape(): Promise<string> {
    // A key that rotates, one the API does not know (fails, and alerts through a real sink).
    const keys = keyYaml('key_demo_billing', 'maxAge: 30d') + keyYaml('key_unknown', 'schedule: "0 3 * * 1"');
    // An AWS backend no key writes to: its throttling counters start at 0 all the same (no AWS call).
    const policy = policyYaml(bench.emulator.url, bench.secretsDir, keys)
      .replace(
        'defaults:',
        `alerts:\n  sinks:\n    oncall: { kind: webhook, url: "${alerts.url}/alerts" }\ndefaults:`,
      )
      .replace('backends:\n', 'backends:\n  aws-prod: { kind: aws, region: eu-west-1 }\n');
    await bench.writePolicyText(policy);
    // No recording alerter: the daemon's own, which counts deliveries in keyroll_alerts_total.
    const daemon = await bench.start({
      metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN',
      runtime: { alerter: undefined },
    });
    await daemon.idle();
    const response = await fetch(`${daemon.url}/metrics`, {
      headers: { authorization: `Bearer ${METRICS_TOKEN}` },
    });
    expect(response.status).toBe(200);
    return response.text();
  }

  async function pushedRun(): Promise<{ text: string; labels: string[] }> {
    await cli.writePolicy({
      extraKeys: `  - id: key_unknown\n    organization: org_demo_acme\n    destinations: [{ backend: files, path: unknown.json }]\n`,
    });
    const result = await cli.run([
      'run',
      '-p',
      'policy.yaml',
      '--shard',
      '0/1',
      '--pushgateway',
      gateway.url,
    ]);
    expect(result.code).toBe(1);
    const [push] = gateway.requests;
    expect(push?.method).toBe('PUT');
    // The Pushgateway adds instance="" to pushed series without one.
    return { text: push?.raw ?? '', labels: [...groupingLabels(push?.path ?? ''), 'instance'] };
  }

  it('finds every metric and label of the dashboard and the rules in a daemon scrape and a pushed run', async () => {
    const exported: Exported = new Map();
    const scrape = await daemonScrape();
    merge(exported, exportedNames(scrape, TARGET_LABELS));
    const push = await pushedRun();
    expect(push.labels).toEqual(['job', 'command', 'shard', 'instance']);
    merge(exported, exportedNames(push.text, push.labels));
    // The scenario exercised what the queries select on: results, reasons, steps, sinks, keys.
    for (const [metric, label] of [
      ['keyroll_rotations_total', 'result'],
      ['keyroll_rotations_total', 'reason'],
      ['keyroll_rotation_step_duration_seconds_bucket', 'step'],
      ['keyroll_alerts_total', 'sink'],
      ['keyroll_key_max_age_seconds', 'key_id'],
      ['keyroll_backend_throttled_total', 'group'],
    ] as const) {
      expect(exported.get(metric)?.has(label), `${metric}{${label}}`).toBe(true);
    }
    const problems = everyExpression().flatMap(({ where, expr }) =>
      namingProblems(expr, exported).map((problem) => `${where}: ${problem}`),
    );
    expect(problems).toEqual([]);
  });

  it('every metric the daemon exports is documented in docs/metrics.md', async () => {
    const names = new Set(
      [...exportedNames(await daemonScrape()).keys()]
        .filter((name) => name.startsWith('keyroll_'))
        .map((name) => name.replace(/_(bucket|sum|count)$/, '')),
    );
    const doc = await readFile(new URL('../../docs/metrics.md', import.meta.url), 'utf8');
    expect([...names].filter((name) => !doc.includes(`| \`${name}\` |`))).toEqual([]);
  });
});

describe('namingProblems', () => {
  const exported: Exported = new Map([
    ['keyroll_rotations_total', new Set(['job', 'result', 'reason'])],
    ['keyroll_keys_overdue', new Set(['job'])],
  ]);

  it('passes a query that names exported metrics and labels, target labels and documented outside series', () => {
    expect(
      namingProblems(
        'sum by (result, namespace) (increase(keyroll_rotations_total{reason="leak", pod!=""}[$__rate_interval]))',
        exported,
      ),
    ).toEqual([]);
    expect(
      namingProblems(
        'time() - max by (namespace, cronjob) (kube_cronjob_next_schedule_time{cronjob=~".*keyroll.*"})',
        exported,
      ),
    ).toEqual([]);
  });

  it('names a metric nobody exports, a label the metric lacks, and a grouping label no metric has', () => {
    expect(namingProblems('keyroll_keys_overdu > 0', exported)).toEqual([
      'keyroll_keys_overdu: no such metric is exported',
    ]);
    expect(namingProblems('keyroll_rotations_total{key_id="a"}', exported)).toEqual([
      'keyroll_rotations_total{key_id}: keyroll_rotations_total has no label key_id',
    ]);
    expect(namingProblems('sum by (sink) (keyroll_rotations_total)', exported)).toEqual([
      'by/on (sink): no metric of the expression has label sink',
    ]);
    expect(namingProblems('kube_cronjob_next_schedule_time{pod="x"}', exported)).toEqual([
      'kube_cronjob_next_schedule_time{pod}: kube_cronjob_next_schedule_time has no label pod',
    ]);
  });

  it('reports an expression that is not PromQL', () => {
    expect(namingProblems('sum(keyroll_keys_overdue', exported)[0]).toMatch(/not PromQL/);
  });
});
