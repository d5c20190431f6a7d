// The picture of the Grafana dashboard in docs/metrics.md (docs/images/dashboard.png), from real
// data: a keyroll daemon runs for a few minutes against the emulator (keys rotating every minute, a
// key the API does not know that fails into quarantine, a key rolled outside keyroll (drift), a
// lock held by another runner, a sink that refuses alerts, GitHub leak alerts through the intake, a
// leak rotation that fails); a real Prometheus scrapes its /metrics every 5 s; then every query of
// the dashboard (src/monitoring/dashboard.ts) is asked of that Prometheus over its HTTP API, and
// the answers are drawn at the dashboard's own grid positions and screenshot with headless
// Chromium. The drawing is this script's, not Grafana's (no Grafana installs from the registries
// this project reaches); the numbers are Prometheus' answers to the dashboard's queries.
//
//   node bench/dashboard-picture.ts [--minutes 8] [--out docs/images/dashboard.png]
// Needs: a prometheus binary (PROMETHEUS=path, or built by bench/dashboard-picture.sh) and
// chromium (apt-get install chromium).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve as resolvePath } from 'node:path';
import { parseArgs } from 'node:util';
import { sign } from '@octokit/webhooks-methods';
import { staticCredential } from '../src/api/credentials.ts';
import { createNullAuditLog } from '../src/audit/logger.ts';
import { Secret } from '../src/audit/secret.ts';
import { createBackend } from '../src/backends/registry.ts';
import { startEmulator } from '../src/emulator/server.ts';
import { dashboardObject } from '../src/monitoring/dashboard.ts';
import { Daemon } from '../src/daemon/daemon.ts';
import { signTriggerRequest } from '../src/scheduler/trigger-auth.ts';
import { startReceiver } from '../test/support/alert-receiver.ts';
import { secretScanningWebhook, startFakeGithub } from '../test/support/fake-github.ts';
import { renderDashboardHtml, type PanelData } from './lib/dashboard-html.ts';

const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '8' },
    out: { type: 'string', default: 'docs/images/dashboard.png' },
  },
});
const minutes = Number(values.minutes);
const prometheusBin = process.env.PROMETHEUS ?? 'prometheus';
const chromium = process.env.CHROMIUM ?? 'chromium';
const OWNER_TOKEN = 'demo-owner-token';
const ORG = 'org_demo_acme';
const METRICS_TOKEN = 'dashboard-picture-metrics-token-0123456789';
const TRIGGER_KEY = 'dashboard-picture-trigger-key-0123456789abcdef';
const WEBHOOK_SECRET = 'dashboard-picture-github-webhook-secret';
const say = (text: string): void => {
  process.stderr.write(`dashboard-picture: ${text}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const dir = await mkdtemp(join(tmpdir(), 'keyroll-dashboard-'));
const emulator = await startEmulator({ port: 0 });
const github = await startFakeGithub();
const pager = await startReceiver();
const chat = await startReceiver();
// The chat sink refuses everything: each alert to it fails after its retries.
chat.answer(...Array.from({ length: 1000 }, () => 503));
const DRIFTING = emulator.state.addApiKey({ name: 'reports', organizationId: ORG }).id;
const LOCKED = emulator.state.addApiKey({ name: 'exports', organizationId: ORG }).id;

const key = (id: string, settings: string): string =>
  `  - id: ${id}\n    organization: ${ORG}\n    destinations: [{ backend: files, path: ${id}.json }]\n${settings.replace(/^/gm, '    ')}\n`;
await writeFile(
  join(dir, 'policy.yaml'),
  `version: 1
api:
  baseUrl: ${emulator.url}
  credential: { type: bearer, token: env:KEYROLL_PICTURE_UNUSED }
  rateLimitPerMinute: 6000
backends:
  files: { kind: file, directory: ${JSON.stringify(join(dir, 'secrets'))} }
alerts:
  sinks:
    pager: { kind: webhook, url: "${pager.url}/alerts" }
    chat: { kind: webhook, url: "${chat.url}/alerts" }
defaults:
  timezone: UTC
  minInterval: 30s
  failures: { backoff: { initial: 1m, cap: 2m, jitter: 0 }, quarantineAfter: 3 }
keys:
${key('key_demo_billing', 'schedule: "* * * * *"\nmaxAge: 1h')}${key('key_demo_search', 'schedule: "*/2 * * * *"\nmaxAge: 3m')}${key('key_demo_ingest', 'maxAge: 150s')}${key(DRIFTING, 'schedule: "0 3 * * 1"\nmaxAge: 7d\ndriftCheck: 1m\nonDrift: alert')}${key(LOCKED, 'schedule: "* * * * *"\nmaxAge: 10m')}${key('key_retired', 'schedule: "* * * * *"\nmaxAge: 1d')}intake:
  github:
    webhookSecret: env:KR_GITHUB_WEBHOOK_SECRET
    apiUrl: ${github.url}
    token: env:KR_GITHUB_TOKEN
`,
);

const daemon = await Daemon.start({
  policyFile: join(dir, 'policy.yaml'),
  listen: { host: '127.0.0.1', port: 0 },
  audit: createNullAuditLog(),
  checkIntervalMs: 30_000,
  stateDir: join(dir, 'state'),
  triggerKeys: [{ caller: 'alice', ref: 'env:KEYROLL_TRIGGER_KEY_ALICE' }],
  metricsTokenRef: 'env:KEYROLL_METRICS_TOKEN',
  env: {
    KEYROLL_TRIGGER_KEY_ALICE: TRIGGER_KEY,
    KEYROLL_METRICS_TOKEN: METRICS_TOKEN,
    KR_GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET,
    KR_GITHUB_TOKEN: github.token,
  },
  runtime: { credentials: staticCredential(new Secret(OWNER_TOKEN), 'emulator owner token') },
});
say(`daemon at ${daemon.url}, emulator at ${emulator.url}`);

await writeFile(join(dir, 'metrics-token'), METRICS_TOKEN);
await writeFile(
  join(dir, 'prometheus.yml'),
  `global: { scrape_interval: 5s, evaluation_interval: 5s }
scrape_configs:
  - job_name: keyroll
    authorization: { type: Bearer, credentials_file: ${JSON.stringify(join(dir, 'metrics-token'))} }
    static_configs: [{ targets: ["${new URL(daemon.url).host}"], labels: { namespace: keyroll } }]
`,
);
const prometheusPort = 19_090 + Math.floor(Math.random() * 500);
const prometheus = spawn(
  prometheusBin,
  [
    `--config.file=${join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${join(dir, 'tsdb')}`,
    `--web.listen-address=127.0.0.1:${prometheusPort}`,
  ],
  { stdio: ['ignore', 'ignore', 'pipe'] },
);
let prometheusLog = '';
prometheus.stderr.on('data', (chunk: Buffer) => {
  prometheusLog = (prometheusLog + chunk.toString()).slice(-4000);
});
const prometheusUrl = `http://127.0.0.1:${prometheusPort}`;

async function postTrigger(body: string): Promise<number> {
  const timestamp = Math.floor(Date.now() / 1000);
  const nonce = randomBytes(16).toString('hex');
  const signature = signTriggerRequest(new Secret(TRIGGER_KEY), timestamp, nonce, body);
  const response = await fetch(`${daemon.url}/v1/rotations`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-keyroll-caller': 'alice',
      'x-keyroll-timestamp': String(timestamp),
      'x-keyroll-nonce': nonce,
      'x-keyroll-signature': signature,
    },
    body,
  });
  await response.body?.cancel();
  return response.status;
}

let alertNumber = 0;
/** A GitHub secret scanning alert for the value billing holds now, through the daemon's intake. */
async function leakBilling(): Promise<void> {
  const text = await readFile(join(dir, 'secrets', 'key_demo_billing.json'), 'utf8');
  const leaked = (JSON.parse(text) as { apiKey: string }).apiKey;
  alertNumber += 1;
  github.addAlert({
    owner: 'octo-org',
    repo: 'billing-app',
    number: alertNumber,
    state: 'open',
    secret: leaked,
  });
  const body = JSON.stringify(
    secretScanningWebhook('created', { owner: 'octo-org', repo: 'billing-app', number: alertNumber }),
  );
  const response = await fetch(`${daemon.url}/v1/leaks/github`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'x-github-event': 'secret_scanning_alert',
      'x-github-delivery': `picture-${alertNumber}`,
      'x-hub-signature-256': await sign(WEBHOOK_SECRET, body),
    },
    body,
  });
  await response.body?.cancel();
  say(`leak alert ${alertNumber}: ${response.status}`);
}

const backend = await createBackend('files', { kind: 'file', directory: join(dir, 'secrets') });
const lockTarget = {
  path: `${LOCKED}.json`,
  shape: {
    format: 'json' as const,
    secretField: 'apiKey',
    fields: ['keyId', 'organizationId', 'rotatedAt'] as ('keyId' | 'organizationId' | 'rotatedAt')[],
  },
};
const start = Date.now();
const at = (minute: number): Promise<void> => sleep(Math.max(0, start + minute * 60_000 - Date.now()));
try {
  // The story, minute by minute (scaled to --minutes).
  const part = minutes / 8;
  await at(1 * part);
  // Another runner holds the exports key for three minutes: its rotations are busy meanwhile.
  const held = await backend.acquireLock(lockTarget, {
    owner: 'other-runner/4711',
    rotationId: 'held-by-hand',
    ttlMs: 3 * 60_000 * part,
    clockSkewMs: 0,
  });
  await at(1.5 * part);
  await leakBilling();
  await at(2.5 * part);
  // The reports key is rolled in the dashboard: its stored secret dies (drift, onDrift: alert).
  emulator.state.rollKey(DRIFTING);
  await at(3 * part);
  // A leak rotation of a key the API no longer has: it fails.
  say(
    `leak trigger for key_retired: ${await postTrigger(JSON.stringify({ keys: ['key_retired'], reason: 'leak' }))}`,
  );
  await at(4 * part);
  if (held.acquired) await backend.releaseLock(lockTarget, held.lock);
  await leakBilling();
  await at(5 * part);
  // ...and again from minute 5 on: the picture ends with it held.
  const heldAgain = await backend.acquireLock(lockTarget, {
    owner: 'other-runner/4712',
    rotationId: 'held-again',
    ttlMs: 60 * 60_000,
    clockSkewMs: 0,
  });
  await at(6 * part);
  await leakBilling();
  await at(minutes);
  await sleep(6_000);
  if (heldAgain.acquired) await backend.releaseLock(lockTarget, heldAgain.lock);

  const end = Date.now() / 1000;
  const dashboard = dashboardObject() as {
    panels: {
      id: number;
      type: string;
      title: string;
      gridPos: { x: number; y: number; w: number; h: number };
      targets?: { expr: string; legendFormat?: string }[];
      fieldConfig?: {
        defaults?: {
          unit?: string;
          decimals?: number;
          thresholds?: { steps: { color: string; value: number | null }[] };
          custom?: { drawStyle?: string };
        };
      };
    }[];
  };
  const panels: PanelData[] = [];
  for (const panel of dashboard.panels) {
    const series: PanelData['series'] = [];
    for (const target of panel.targets ?? []) {
      // $__rate_interval as Grafana computes it: the step plus the scrape interval (5 s), so no
      // increase falls between two windows; bars one minute apart, lines every 20 s.
      const bars = panel.fieldConfig?.defaults?.custom?.drawStyle === 'bars';
      const step = bars ? 60 : 20;
      const expr = target.expr.replace(/\$__rate_interval/g, `${step + 5}s`);
      const instant = panel.type !== 'timeseries';
      const url = instant
        ? `${prometheusUrl}/api/v1/query?query=${encodeURIComponent(expr)}&time=${end}`
        : `${prometheusUrl}/api/v1/query_range?query=${encodeURIComponent(expr)}&start=${start / 1000 + 60}&end=${end}&step=${step}`;
      const answer = (await (await fetch(url)).json()) as {
        status: string;
        error?: string;
        data: {
          result: { metric: Record<string, string>; value?: [number, string]; values?: [number, string][] }[];
        };
      };
      if (answer.status !== 'success') throw new Error(`Prometheus refused ${expr}: ${answer.error ?? ''}`);
      for (const result of answer.data.result) {
        const legend =
          (target.legendFormat ?? '').replace(
            /\{\{\s*(\w+)\s*\}\}/g,
            (_, name: string) => result.metric[name] ?? '',
          ) || expr;
        const points = (result.values ?? (result.value ? [result.value] : [])).map(
          ([t, v]) => [t, Number(v)] as [number, number],
        );
        series.push({ legend, points });
      }
    }
    panels.push({
      id: panel.id,
      type: panel.type,
      title: panel.title,
      gridPos: panel.gridPos,
      unit: panel.fieldConfig?.defaults?.unit ?? 'short',
      decimals: panel.fieldConfig?.defaults?.decimals,
      thresholds: panel.fieldConfig?.defaults?.thresholds?.steps ?? [],
      bars: panel.fieldConfig?.defaults?.custom?.drawStyle === 'bars',
      series,
    });
  }
  const html = renderDashboardHtml({ title: 'keyroll', from: start / 1000, to: end, panels });
  await writeFile(join(dir, 'dashboard.html'), html);
  const height = Math.max(...panels.map((p) => p.gridPos.y + p.gridPos.h)) * 34 + 70;
  const out = values.out;
  await new Promise<void>((resolve, reject) => {
    const shot = spawn(
      chromium,
      [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--hide-scrollbars',
        `--user-data-dir=${join(dir, 'chromium')}`,
        `--window-size=1600,${height}`,
        `--screenshot=${resolvePath(out)}`,
        `file://${join(dir, 'dashboard.html')}`,
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let log = '';
    shot.stderr.on('data', (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-2000);
    });
    shot.on('exit', (code) => {
      if (code === 0 && /bytes written to file/.test(log)) resolve();
      else reject(new Error(`chromium exited ${String(code)} without a screenshot: ${log}`));
    });
  });
  say(
    `wrote ${out} (${panels.filter((p) => p.type !== 'row').length} panels, ${Math.round(end - start / 1000)} s of data); emulator rolls: ${emulator.state.totalRolls()}`,
  );
} catch (error) {
  say(`failed: ${String(error)}\n${prometheusLog}`);
  process.exitCode = 1;
} finally {
  prometheus.kill('SIGTERM');
  await daemon.shutdown();
  await backend.close();
  await emulator.close();
  await github.close();
  await pager.close();
  await chat.close();
  await rm(dir, { recursive: true, force: true });
}
