// The Grafana dashboard keyroll ships (docs/metrics.md, "Dashboard"): the rows and panels below,
// laid out and turned into Grafana's dashboard JSON by `npm run monitoring:generate`
// (helm/keyroll/monitoring/grafana-dashboard.json, loaded by Grafana's sidecar from the chart's
// ConfigMap). A panel for a new metric is one entry in a row. Every query names only metrics
// keyroll exports or the outside series in rules.ts EXTERNAL_SERIES (checked against a real scrape
// by test/monitoring/metric-names.test.ts).
//
// Counters are read where the daemon is scraped (`command=""`: pushed series carry the
// Pushgateway grouping label `command`, and each push replaces its group, so `increase` over
// them means nothing); the last row shows what `run --pushgateway` pushed.

export type PanelKind = 'stat' | 'timeseries' | 'bargauge';

export interface PanelQuery {
  expr: string;
  /** Grafana legend template, e.g. `{{result}}`. */
  legend?: string;
}

export interface PanelSpec {
  kind: PanelKind;
  title: string;
  description: string;
  queries: PanelQuery[];
  /** Grafana unit id: short, s, percentunit, ... */
  unit: string;
  /** Decimals shown; counts of events are whole (increase() extrapolates to fractions). */
  decimals?: number;
  /** Width in Grafana's 24-column grid. */
  width: number;
  height?: number;
  /** stat and bargauge: the value from which the panel turns orange, then red. */
  thresholds?: readonly [warn: number, bad: number];
  /** timeseries: bars for counts per interval, lines for levels and quantiles. */
  bars?: boolean;
}

export interface RowSpec {
  title: string;
  panels: PanelSpec[];
}

const daemonCounter = (name: string, matchers = ''): string =>
  `${name}{${matchers === '' ? '' : `${matchers},`}command=""}`;

const stat = (
  title: string,
  expr: string,
  description: string,
  thresholds: readonly [number, number] = [1, 1],
): PanelSpec => ({
  kind: 'stat',
  title,
  description,
  queries: [{ expr }],
  unit: 'short',
  decimals: 0,
  width: 4,
  height: 4,
  thresholds,
});

const countsOverTime = (
  title: string,
  expr: string,
  legend: string,
  description: string,
  width = 12,
): PanelSpec => ({
  kind: 'timeseries',
  title,
  description,
  queries: [{ expr, legend }],
  unit: 'short',
  decimals: 0,
  width,
  bars: true,
});

const quantiles = (title: string, bucket: string, description: string, width = 12): PanelSpec => ({
  kind: 'timeseries',
  title,
  description,
  unit: 's',
  width,
  queries: [0.5, 0.9, 0.99].map((q) => ({
    expr: `histogram_quantile(${q}, sum by (le) (rate(${bucket}[$__rate_interval])))`,
    legend: `p${q * 100}`,
  })),
});

export const DASHBOARD_ROWS: readonly RowSpec[] = [
  {
    title: 'Now',
    panels: [
      stat(
        'Keys overdue',
        'sum(keyroll_keys_overdue)',
        'Keys past their maxAge or more than one schedule period behind, as the daemon last read them.',
      ),
      stat(
        'Keys quarantined',
        'sum(keyroll_keys_quarantined)',
        'Keys left alone after repeated failures until keyroll resume (docs/runbook.md, "Quarantined keys").',
      ),
      stat(
        'Keys drifted',
        'sum(keyroll_keys_drifted)',
        'Keys whose stored secret stopped working (rolled outside keyroll) and is not healed yet.',
      ),
      stat(
        'Keys locked',
        'sum(keyroll_keys_locked)',
        'Keys whose backend lock a runner held at the last sweep; one that stays locked across sweeps is stuck (docs/runbook.md, "Clearing a stale lock").',
        [1, 3],
      ),
      stat(
        'Failed rotations (24 h)',
        `sum(increase(${daemonCounter('keyroll_rotations_total', 'result="failed"')}[24h]))`,
        'Rotations that ended failed over the last day (each one alerted).',
      ),
      stat(
        'Undelivered alerts (24 h)',
        `sum(increase(${daemonCounter('keyroll_alerts_total', 'result="failed"')}[24h]))`,
        'Alert messages no sink took after retries: failures nobody was told about.',
      ),
    ],
  },
  {
    title: 'Rotations',
    panels: [
      countsOverTime(
        'Rotations by result',
        `sum by (result) (increase(${daemonCounter('keyroll_rotations_total')}[$__rate_interval]))`,
        '{{result}}',
        'Every key handled under its lock: rotated, recovered, failed, busy, skipped, aborted.',
      ),
      countsOverTime(
        'Failures by reason',
        `sum by (reason) (increase(${daemonCounter('keyroll_rotations_total', 'result="failed"')}[$__rate_interval]))`,
        '{{reason}}',
        'Failed rotations by why they ran: scheduled, leak, compromise, plan-change, manual.',
      ),
      {
        kind: 'timeseries',
        title: 'Step duration (p90)',
        description:
          'Where the time of a rotation goes, per step: preflight, lock, intent, roll (429 waits included), store (retries included), verify, finish.',
        queries: [
          {
            expr: `histogram_quantile(0.9, sum by (le, step) (rate(${daemonCounter('keyroll_rotation_step_duration_seconds_bucket')}[$__rate_interval])))`,
            legend: '{{step}}',
          },
        ],
        unit: 's',
        width: 24,
      },
    ],
  },
  {
    title: 'Keys',
    panels: [
      {
        kind: 'bargauge',
        title: 'Age of each key against its maxAge',
        description:
          'Time since the last rotation as a share of the maxAge of the policy: 100 % is overdue. Keys without a maxAge are not shown. Per-key series need the daemon metrics token.',
        queries: [
          {
            expr: 'max by (key_id) (time() - keyroll_key_last_rotation_timestamp_seconds)\n/ on (key_id)\nmax by (key_id) (keyroll_key_max_age_seconds)',
            legend: '{{key_id}}',
          },
        ],
        unit: 'percentunit',
        width: 12,
        height: 10,
        thresholds: [0.8, 1],
      },
      {
        kind: 'bargauge',
        title: 'Time since the last rotation',
        description: "Every key's age, from the last rotation recorded at its primary destination.",
        queries: [
          {
            expr: 'max by (key_id) (time() - keyroll_key_last_rotation_timestamp_seconds)',
            legend: '{{key_id}}',
          },
        ],
        unit: 's',
        width: 12,
        height: 10,
      },
      quantiles(
        'Exposure window',
        daemonCounter('keyroll_secret_exposure_window_seconds_bucket'),
        'Roll answer → first durable write: the only copy of the only working secret is in memory meanwhile. Milliseconds when healthy; seconds mean store retries.',
        24,
      ),
    ],
  },
  {
    title: 'Leaks',
    panels: [
      countsOverTime(
        'Leak rotations by result',
        `sum by (result) (increase(${daemonCounter('keyroll_rotations_total', 'reason="leak"')}[$__rate_interval]))`,
        '{{result}}',
        'Rotations after a leak report, a trigger or rotate --reason leak.',
      ),
      quantiles(
        'Leak report → leaked value dead',
        daemonCounter('keyroll_leak_time_to_dead_seconds_bucket'),
        'From the leak report (or rotate --leaked-secret-stdin) to the API refusing the leaked value (401).',
      ),
    ],
  },
  {
    title: 'Consumers',
    panels: [
      countsOverTime(
        'Consumer refreshes by result',
        `sum by (result) (increase(${daemonCounter('keyroll_consumer_refreshes_total')}[$__rate_interval]))`,
        '{{result}}',
        'Consumers told of a new value (invariant 12): refreshed, failed (alerted; the rotation stands), deferred to the restart window, skipped (another runner restarted the workload).',
      ),
      countsOverTime(
        'Consumers not refreshed, by kind',
        `sum by (kind) (increase(${daemonCounter('keyroll_consumer_refreshes_total', 'result="failed"')}[$__rate_interval]))`,
        '{{kind}}',
        'Failed refreshes per consumer kind (externalSecret, deployment, statefulSet, daemonSet, webhook): each may still hold the old value (docs/runbook.md, "A consumer was not refreshed").',
      ),
      quantiles(
        'Store → every consumer refreshed',
        daemonCounter('keyroll_consumers_refreshed_seconds_bucket'),
        'From the store of a new value to the last of its consumers refreshed (ExternalSecrets synced, rollouts complete, webhooks told); values with a failed or deferred consumer are not counted.',
        24,
      ),
    ],
  },
  {
    title: 'Alerts',
    panels: [
      countsOverTime(
        'Alert deliveries by sink',
        `sum by (sink, result) (increase(${daemonCounter('keyroll_alerts_total')}[$__rate_interval]))`,
        '{{sink}} {{result}}',
        'Alert messages per sink, sent or failed after retries.',
        24,
      ),
    ],
  },
  {
    title: 'Backends',
    panels: [
      countsOverTime(
        'Backend throttling',
        `sum by (backend, group) (increase(${daemonCounter('keyroll_backend_throttled_total')}[$__rate_interval]))`,
        '{{backend}} {{group}}',
        "Backend requests refused for a request quota and waited out (AWS ThrottlingException, a Vault/OpenBao 429), per backend and quota group. Not a failure (invariant 11); a steady rise means another writer spends the same budget, or the policy's quotas are set too high.",
      ),
      {
        kind: 'timeseries',
        title: 'Waiting for a quota turn',
        description:
          "Time backend requests waited in keyroll's own pacing inside the quotas, per interval: an emergency over many keys in one AWS account and region shows here, not as failures.",
        queries: [
          {
            expr: `sum by (backend, group) (increase(${daemonCounter('keyroll_backend_quota_wait_seconds_total')}[$__rate_interval]))`,
            legend: '{{backend}} {{group}}',
          },
        ],
        unit: 's',
        width: 12,
        bars: true,
      },
    ],
  },
  {
    title: 'Scheduled runs (Pushgateway)',
    panels: [
      {
        kind: 'stat',
        title: 'Since the last pushed run',
        description: 'keyroll run --pushgateway pushes once at the end of each run; per shard.',
        queries: [
          {
            expr: 'time() - max by (shard) (push_time_seconds{job="keyroll",command="run"})',
            legend: '{{shard}}',
          },
        ],
        unit: 's',
        width: 8,
        height: 6,
      },
      countsOverTime(
        'Last pushed run by result',
        'sum by (result) (keyroll_rotations_total{job="keyroll",command="run"})',
        '{{result}}',
        'The counts of the last run each shard pushed (a push replaces the one before).',
        16,
      ),
    ],
  },
];

interface GridPos {
  h: number;
  w: number;
  x: number;
  y: number;
}

const DATASOURCE = { type: 'prometheus', uid: '${datasource}' } as const;

function thresholdSteps(thresholds: readonly [number, number] | undefined): unknown {
  if (thresholds === undefined) return { mode: 'absolute', steps: [{ color: 'green', value: null }] };
  const [warn, bad] = thresholds;
  const steps = [
    { color: 'green', value: null },
    ...(warn < bad ? [{ color: 'orange', value: warn }] : []),
    { color: 'red', value: bad },
  ];
  return { mode: 'absolute', steps };
}

function panelJson(panel: PanelSpec, id: number, gridPos: GridPos): Record<string, unknown> {
  const targets = panel.queries.map((query, index) => ({
    datasource: DATASOURCE,
    refId: String.fromCharCode(65 + index),
    expr: query.expr,
    ...(query.legend === undefined ? {} : { legendFormat: query.legend }),
    ...(panel.kind === 'timeseries' ? {} : { instant: true }),
  }));
  const custom =
    panel.kind === 'timeseries'
      ? {
          drawStyle: panel.bars === true ? 'bars' : 'line',
          fillOpacity: panel.bars === true ? 80 : 10,
          lineWidth: 1,
          showPoints: 'never',
          stacking: { mode: panel.bars === true ? 'normal' : 'none' },
        }
      : undefined;
  const options =
    panel.kind === 'stat'
      ? {
          colorMode: 'background',
          graphMode: 'none',
          reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
          textMode: 'auto',
        }
      : panel.kind === 'bargauge'
        ? {
            displayMode: 'gradient',
            orientation: 'horizontal',
            reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
            showUnfilled: true,
          }
        : {
            legend: { displayMode: 'list', placement: 'bottom', showLegend: true },
            tooltip: { mode: 'multi', sort: 'desc' },
          };
  return {
    id,
    type: panel.kind,
    title: panel.title,
    description: panel.description,
    datasource: DATASOURCE,
    gridPos,
    targets,
    fieldConfig: {
      defaults: {
        unit: panel.unit,
        ...(panel.decimals === undefined ? {} : { decimals: panel.decimals }),
        thresholds: thresholdSteps(panel.thresholds),
        ...(custom === undefined ? {} : { custom }),
      },
      overrides: [],
    },
    options,
  };
}

/** Grafana's dashboard model: rows and panels laid out left to right on the 24-column grid. */
export function dashboardObject(rows: readonly RowSpec[] = DASHBOARD_ROWS): Record<string, unknown> {
  const panels: Record<string, unknown>[] = [];
  let id = 1;
  let y = 0;
  for (const row of rows) {
    panels.push({
      id: id++,
      type: 'row',
      title: row.title,
      collapsed: false,
      gridPos: { h: 1, w: 24, x: 0, y },
      panels: [],
    });
    y += 1;
    let x = 0;
    let lineHeight = 0;
    for (const panel of row.panels) {
      const h = panel.height ?? 8;
      if (x + panel.width > 24) {
        y += lineHeight;
        x = 0;
        lineHeight = 0;
      }
      panels.push(panelJson(panel, id++, { h, w: panel.width, x, y }));
      x += panel.width;
      lineHeight = Math.max(lineHeight, h);
    }
    y += lineHeight;
  }
  return {
    uid: 'keyroll',
    title: 'keyroll',
    description:
      'Key rotations, keys that need a person, exposure window, leaks, consumer refreshes and alert delivery (docs/metrics.md).',
    tags: ['keyroll'],
    editable: true,
    graphTooltip: 1,
    refresh: '1m',
    schemaVersion: 39,
    time: { from: 'now-7d', to: 'now' },
    timezone: 'utc',
    annotations: { list: [] },
    templating: {
      list: [
        {
          name: 'datasource',
          label: 'Data source',
          type: 'datasource',
          query: 'prometheus',
          current: {},
          hide: 0,
          refresh: 1,
          regex: '',
          options: [],
        },
      ],
    },
    links: [],
    panels,
  };
}

/** Every query of the dashboard with the panel it belongs to (tests, the picture in docs/metrics.md). */
export function dashboardQueries(
  rows: readonly RowSpec[] = DASHBOARD_ROWS,
): { panel: string; expr: string }[] {
  return rows.flatMap((row) =>
    row.panels.flatMap((panel) => panel.queries.map((query) => ({ panel: panel.title, expr: query.expr }))),
  );
}

/** The text of helm/keyroll/monitoring/grafana-dashboard.json. */
export function dashboardText(): string {
  return `${JSON.stringify(dashboardObject(), null, 2)}\n`;
}
