// The Prometheus alert rules keyroll ships, in one place: `npm run monitoring:generate` writes them
// as the plain rules file (config/prometheus-rules.yaml) and as the chart's copy the PrometheusRule
// is rendered from (helm/keyroll/monitoring/prometheus-rules.yaml), so the two never differ.
// Every expression names only metrics keyroll exports (docs/metrics.md), or the documented
// outside series in EXTERNAL_SERIES (test/monitoring/metric-names.test.ts checks both against a
// real scrape); every alert has a promtool unit test (helm/tests/prometheus-rules.test.yaml).
import { stringify } from 'yaml';

/** The rule groups, by which way keyroll runs: the chart renders `keyroll` always, plus the group of its mode. */
export type RuleGroupName = 'keyroll' | 'keyroll-daemon' | 'keyroll-cronjob';

export interface AlertRule {
  alert: string;
  expr: string;
  /** How long the condition must hold before the alert fires; absent: at once. */
  for?: string;
  severity: 'critical' | 'warning';
  summary: string;
  description: string;
  /** The heading of docs/runbook.md that says what to do (its GitHub anchor is derived from it). */
  runbookSection: string;
}

export interface RuleGroup {
  name: RuleGroupName;
  /** Why the group exists and when to load it (a comment in the generated file). */
  about: string;
  rules: AlertRule[];
}

/**
 * The runbook links are relative to the repository root: the chart's
 * `prometheusRule.runbookBaseUrl` (or a sed over the plain file) turns them into absolute links
 * where the docs are published.
 */
export const RUNBOOK_PATH = 'docs/runbook.md';

/**
 * Series from outside keyroll that rules or panels may name, with where they come from and their
 * labels. The metric cross-check accepts exactly these besides keyroll's own.
 */
export const EXTERNAL_SERIES: Readonly<Record<string, { source: string; labels: readonly string[] }>> = {
  push_time_seconds: {
    source: 'the Prometheus Pushgateway: when a group (job=keyroll, command, shard) was last pushed',
    labels: ['job', 'instance', 'command', 'shard'],
  },
  kube_cronjob_next_schedule_time: {
    source: 'kube-state-metrics: the next time the CronJob should start',
    labels: ['namespace', 'cronjob'],
  },
  kube_cronjob_spec_suspend: {
    source: 'kube-state-metrics: 1 while the CronJob is suspended',
    labels: ['namespace', 'cronjob'],
  },
};

/**
 * A counter "went up" both where it is scraped (the daemon: `increase` over the window) and where
 * it is pushed (`run`/`rotate --pushgateway`: each push replaces its group, so the value is the
 * last run's own count and stays until the next push; `increase` would miss a first push). Pushed
 * series carry the grouping label `command`; the daemon's have none.
 */
export function counterWentUp(selector: string, by: string, window: string): string {
  const [name, matchers = ''] = selector.split('{');
  const inner = matchers.replace(/\}$/, '');
  const join = inner === '' ? '' : `${inner},`;
  return `sum by (${by}) (increase(${name}{${join}command=""}[${window}])) > 0\nor\nsum by (${by}) (${name}{${join}command!=""}) > 0`;
}

export const RULE_GROUPS: readonly RuleGroup[] = [
  {
    name: 'keyroll',
    about: 'Rules for every way keyroll runs (the daemon, or run/rotate with --pushgateway).',
    rules: [
      {
        alert: 'KeyrollKeyPastMaxAge',
        expr: 'max by (key_id) (time() - keyroll_key_last_rotation_timestamp_seconds)\n> on (key_id)\nmax by (key_id) (keyroll_key_max_age_seconds)',
        for: '15m',
        severity: 'warning',
        summary: 'Key {{ $labels.key_id }} has not been rotated within its maxAge.',
        description:
          'The last completed rotation of {{ $labels.key_id }} is older than the maxAge its policy sets. Per-key series need the daemon metrics token.',
        runbookSection: 'Overdue keys',
      },
      {
        alert: 'KeyrollKeyQuarantined',
        expr: 'sum(keyroll_keys_quarantined) > 0',
        for: '5m',
        severity: 'critical',
        summary:
          '{{ $value }} key(s) quarantined after repeated failures: no automatic rotation until a person acts.',
        description:
          'keyroll stopped trying these keys after failures.quarantineAfter consecutive failures. keyroll status lists them.',
        runbookSection: 'Quarantined keys',
      },
      {
        alert: 'KeyrollLeakRotationFailed',
        expr: counterWentUp('keyroll_rotations_total{reason="leak",result=~"failed|aborted"}', 'job', '1h'),
        severity: 'critical',
        summary: 'A leak rotation failed: the leaked value may still open the API.',
        description:
          'A rotation with reason leak ended failed or aborted within the last hour (daemon), or in the last pushed rotate run.',
        runbookSection: 'A leak rotation failed',
      },
      {
        alert: 'KeyrollAlertDeliveryFailing',
        expr: counterWentUp('keyroll_alerts_total{result="failed"}', 'sink', '30m'),
        severity: 'warning',
        summary: 'keyroll could not deliver alerts to sink {{ $labels.sink }}.',
        description:
          'Alert messages to {{ $labels.sink }} failed after their retries: keyroll failures may be going unnoticed. The audit trail has each one as alert.undeliverable.',
        runbookSection: 'Alerts cannot be delivered',
      },
      {
        alert: 'KeyrollConsumerRefreshFailed',
        // One alert per consumer kind, not per consumer: the metric has no consumer name (it would
        // be a label per workload); keyroll's own alert (step: consumers) names each one.
        expr: counterWentUp('keyroll_consumer_refreshes_total{result="failed"}', 'kind', '1h'),
        severity: 'warning',
        summary:
          'keyroll stored a new value but could not refresh its consumer(s) of kind {{ $labels.kind }}: they may still hold the old value.',
        description:
          'A consumer of kind {{ $labels.kind }} failed its refresh (ExternalSecret sync, workload restart and rollout, or webhook notice) within the last hour (daemon), or in the last pushed run. The rotation stands; keyroll does not retry the consumer by rotating again. The audit trail has each one as consumer.failed with its errorCode and the command to run by hand.',
        runbookSection: 'A consumer was not refreshed',
      },
    ],
  },
  {
    name: 'keyroll-daemon',
    about:
      'Rules for keyroll daemon (load them only with the daemon: the daemon-down rule fires when no daemon reports).',
    rules: [
      {
        alert: 'KeyrollDaemonDown',
        // keyroll_keys_overdue is exported by the daemon alone (never pushed): a daemon that was
        // reporting within the hour and no longer is, or none at all.
        expr: 'max by (namespace, job) (max_over_time(keyroll_keys_overdue[1h]))\nunless\nmax by (namespace, job) (keyroll_keys_overdue)\nor\nabsent(keyroll_keys_overdue)',
        for: '5m',
        severity: 'critical',
        summary: 'keyroll daemon is down or not scraped: no key is rotated, no leak report is taken.',
        description: 'Prometheus has no fresh keyroll daemon metrics (keyroll_keys_overdue) for 5 minutes.',
        runbookSection: 'The daemon is down',
      },
      {
        alert: 'KeyrollKeysOverdue',
        expr: 'sum(keyroll_keys_overdue) > 0',
        for: '1h',
        severity: 'warning',
        summary: '{{ $value }} key(s) past their maxAge or more than one schedule period behind.',
        description:
          "The daemon's sweep found keys that should have been rotated and were not, for an hour. Needs no metrics token (KeyrollKeyPastMaxAge names the keys).",
        runbookSection: 'Overdue keys',
      },
      {
        alert: 'KeyrollDriftNotHealed',
        expr: 'sum(keyroll_keys_drifted) > 0',
        for: '15m',
        severity: 'critical',
        summary:
          '{{ $value }} key(s) whose stored secret no longer works and has not been healed: consumers are failing.',
        description:
          'A drift probe found a stored secret dead (the key was rolled outside keyroll) and no rotation has stored a working one for 15 minutes.',
        runbookSection: 'Drift: a stored secret that stopped working',
      },
      {
        alert: 'KeyrollBackendThrottled',
        // Daemon only: a pushed run's count stays on the gateway until the next push, so a single
        // throttle answer in one run would hold the condition for a whole schedule period.
        expr: 'sum by (backend, group) (increase(keyroll_backend_throttled_total{command=""}[15m])) > 0',
        for: '30m',
        severity: 'warning',
        summary:
          "Backend {{ $labels.backend }} keeps refusing keyroll's requests for its {{ $labels.group }} quota.",
        description:
          "For 45 minutes the backend has answered throttled (AWS ThrottlingException, a Vault/OpenBao 429) and keyroll has waited it out (invariant 11). Rotations are slower; a request still refused after quotas.maxWaitMs fails its key (KR_BACKEND_THROTTLED). Another writer spends the same budget, or the policy's quotas are set higher than the account allows.",
        runbookSection: 'A backend keeps throttling',
      },
    ],
  },
  {
    name: 'keyroll-cronjob',
    about:
      "Rules for the chart's CronJob (keyroll run); from kube-state-metrics, which exports the CronJob's schedule state.",
    rules: [
      {
        alert: 'KeyrollCronJobNotRun',
        // Past its next start time by more than startingDeadlineSeconds (600 s in the chart): the
        // start was missed (controller down, previous run still going under concurrencyPolicy
        // Forbid). A suspended CronJob is meant not to run.
        expr: 'time() - max by (namespace, cronjob) (kube_cronjob_next_schedule_time{cronjob=~".*keyroll.*"}) > 900\nunless on (namespace, cronjob)\nmax by (namespace, cronjob) (kube_cronjob_spec_suspend{cronjob=~".*keyroll.*"}) == 1',
        for: '5m',
        severity: 'critical',
        summary:
          'CronJob {{ $labels.namespace }}/{{ $labels.cronjob }} has not started a run within its schedule.',
        description:
          'The scheduled keyroll run is more than 15 minutes past its start time: keys fall due and are not rotated.',
        runbookSection: 'The scheduled run did not run',
      },
    ],
  },
];

/** GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces to hyphens. */
export function headingAnchor(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The rules in Prometheus' rule file format. */
export function ruleFileObject(groups: readonly RuleGroup[] = RULE_GROUPS): { groups: unknown[] } {
  return {
    groups: groups.map((group) => ({
      name: group.name,
      rules: group.rules.map((rule) => ({
        alert: rule.alert,
        expr: rule.expr,
        ...(rule.for === undefined ? {} : { for: rule.for }),
        labels: { severity: rule.severity },
        annotations: {
          summary: rule.summary,
          description: rule.description,
          runbook_url: `${RUNBOOK_PATH}#${headingAnchor(rule.runbookSection)}`,
        },
      })),
    })),
  };
}

/** The text of config/prometheus-rules.yaml and of the chart's copy. */
export function ruleFileText(): string {
  const about = RULE_GROUPS.map((group) => `#   ${group.name}: ${group.about}`).join('\n');
  return `# keyroll's Prometheus alert rules (docs/metrics.md, "Alert rules"). Generated by
# \`npm run monitoring:generate\` from src/monitoring/rules.ts: edit that, not this file.
# Load with Prometheus' rule_files, or install the chart with prometheusRule.enabled.
# Groups:
${about}
${stringify(ruleFileObject(), { lineWidth: 0 })}`;
}
