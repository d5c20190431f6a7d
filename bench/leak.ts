// Benchmark: the whole leak, end to end (invariant 12). A keyroll daemon with the GitHub intake
// (policy `intake.github`) serves 50 keys of the emulator, each stored in the file backend and
// listing one consumer, a webhook the consumer's owner runs to drop its cache. For each key in
// turn, the value it holds "leaks" (each key also lists its ExternalSecret and the Deployment
// that reads it, on a real kube-apiserver: see below): the fake GitHub (test/support/fake-github.ts, the one the leak
// intake's tests check against GitHub's published schemas) holds a secret scanning alert for it,
// and the bench POSTs the signed `secret_scanning_alert` delivery to the daemon as GitHub does.
// Measured from just before the POST:
//   - leak.timeToDeadMs: until the emulator refuses the leaked value and the file backend holds a
//     new value the emulator accepts (polled every 2 ms; the emulator is the API);
//   - leak.timeToNotifiedMs: until every consumer the key lists was told: its webhook received the
//     notice, its ExternalSecret was annotated force-sync, its Deployment restarted (the daemon's
//     consumer.notified audit lines; the restart comes after the sync, as invariant 12 orders it).
// The Kubernetes consumers live on the kube-apiserver the integration tests use
// (test/support/kube-apiserver.ts, built by scripts/test-kube.sh), keyroll acting as its service
// account bound by the chart's Role; test/support/consumer-cluster.ts's stand-in controllers
// play external-secrets and the deployment controller (no delay of their own; they poll every
// 25 ms), so the figure is keyroll's part plus that polling, not a real controller's sync time.
// One delivery at a time: the figure is the latency of one leak, not the throughput of many.
// The daemon runs in this process (as bench/dashboard-picture.ts runs it), with keyroll's own
// credential the emulator's owner token; nothing leaves 127.0.0.1.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { staticCredential } from '../src/api/credentials.ts';
import { createMemoryAuditLog } from '../src/audit/logger.ts';
import { Secret } from '../src/audit/secret.ts';
import { Daemon } from '../src/daemon/daemon.ts';
import {
  consumerNamespace,
  StandInControllers,
  type ConsumerNamespace,
} from '../test/support/consumer-cluster.ts';
import { startFakeGithub } from '../test/support/fake-github.ts';
import type { RunningKubeApiServer } from '../test/support/kube-apiserver.ts';
import { startBenchKube } from './lib/kube-apiserver.ts';
import type { BenchResult } from './lib/figures.ts';
import { startNoticeReceiver } from './lib/notice-receiver.ts';
import { percentile, round } from './lib/stats.ts';
import { OWNER_TOKEN, ORG, startWorld } from './lib/world.ts';
import { secretScanningDelivery, storedFileValue } from './lib/github-delivery.ts';

const KEYS = 50;
const QUICK_KEYS = 10;
const WEBHOOK_SECRET = 'bench-leak-github-webhook-secret-0123456789abcdef';
const POLL_MS = 2;
/** Per delivery: far above the goal; a leak that takes longer fails the benchmark. */
const DELIVERY_LIMIT_MS = 30_000;

/** The Deployment every key's value reaches (one per leak: deliveries come one at a time). */
const WORKLOAD = 'shop';

/** The ExternalSecret of a key: its id as a Kubernetes name. */
function externalSecretOf(keyId: string): string {
  return keyId.replace(/_/g, '-');
}

function policy(
  emulatorUrl: string,
  githubUrl: string,
  secretsDir: string,
  noticeUrl: string,
  keyIds: readonly string[],
  namespace: string,
): string {
  const consumers = (id: string): string =>
    `[{ kind: webhook, sink: cache-drop }, { kind: externalSecret, namespace: ${namespace}, name: ${externalSecretOf(id)} }, { kind: deployment, namespace: ${namespace}, name: ${WORKLOAD} }]`;
  const keys = keyIds
    .map(
      (id) =>
        `  - { id: ${id}, organization: ${ORG}, destinations: [{ backend: files, path: ${id}.json }], consumers: ${consumers(id)} }`,
    )
    .join('\n');
  return `version: 1
api:
  baseUrl: ${emulatorUrl}
  credential: { type: bearer, token: env:KEYROLL_BENCH_UNUSED }
  rateLimitPerMinute: 6000
backends:
  files: { kind: file, directory: ${JSON.stringify(secretsDir)} }
alerts:
  sinks:
    cache-drop: { kind: webhook, url: "${noticeUrl}" }
defaults:
  schedule: null
  maxAge: 30d
  minInterval: 1h
  notify: { onFailure: [] }
consumers:
  syncTimeout: 30s
  rolloutTimeout: 30s
intake:
  github:
    webhookSecret: env:KR_GITHUB_WEBHOOK_SECRET
    apiUrl: ${githubUrl}
    token: env:KR_GITHUB_TOKEN
keys:
${keys}
`;
}

export async function runLeakBench(options: { quick?: boolean } = {}): Promise<BenchResult> {
  const count = options.quick ? QUICK_KEYS : KEYS;
  const world = await startWorld({ rollRateLimitPerMinute: 6_000 });
  const github = await startFakeGithub();
  const receiver = await startNoticeReceiver();
  let daemon: Daemon | undefined;
  let kube: RunningKubeApiServer | undefined;
  let controllers: StandInControllers | undefined;
  try {
    const keyIds = world.addKeys('key_leak_', count);
    kube = await startBenchKube();
    const cluster: ConsumerNamespace = await consumerNamespace(kube, world.dir, (namespace) => [
      { namespace, externalSecrets: keyIds.map(externalSecretOf), deployments: [WORKLOAD] },
    ]);
    for (const id of keyIds) await cluster.createExternalSecret(externalSecretOf(id));
    await cluster.createDeployment(WORKLOAD);
    controllers = new StandInControllers(cluster, { syncDelayMs: 0, rolloutMs: 0 });
    const audit = createMemoryAuditLog();
    const secretsDir = join(world.dir, 'secrets');
    await mkdir(secretsDir, { recursive: true });
    const policyFile = join(world.dir, 'policy.yaml');
    await writeFile(
      policyFile,
      policy(world.emulator.url, github.url, secretsDir, receiver.url, keyIds, cluster.namespace),
    );
    daemon = await Daemon.start({
      policyFile,
      listen: { host: '127.0.0.1', port: 0 },
      audit,
      kubeClient: () => cluster.client,
      checkIntervalMs: 3_600_000,
      stateDir: join(world.dir, 'state'),
      env: { KR_GITHUB_WEBHOOK_SECRET: WEBHOOK_SECRET, KR_GITHUB_TOKEN: github.token },
      runtime: { credentials: staticCredential(new Secret(OWNER_TOKEN), 'emulator owner token') },
      warn: () => undefined,
    });
    // The first sweep stores every key's first value (never rotated: due by maxAge).
    const firstBy = performance.now() + 120_000;
    for (;;) {
      await daemon.idle();
      const stored = await Promise.all(keyIds.map((id) => storedFileValue(join(secretsDir, `${id}.json`))));
      if (stored.every((value) => value !== undefined)) break;
      if (performance.now() > firstBy) throw new Error('the daemon did not store every key within 120 s');
      await sleep(50);
    }

    const toDead: number[] = [];
    const toNotified: number[] = [];
    const answers = new Map<number, number>();
    let failedConsumers = 0;
    for (const [index, keyId] of keyIds.entries()) {
      const file = join(secretsDir, `${keyId}.json`);
      const leaked = await storedFileValue(file);
      if (leaked === undefined) throw new Error(`${keyId} holds no value`);
      const number = index + 1;
      github.addAlert({ owner: 'octo-org', repo: 'shop', number, state: 'open', secret: leaked });
      const { body, headers } = await secretScanningDelivery(WEBHOOK_SECRET, number);
      const noticesBefore = receiver.arrivals.get(keyId)?.length ?? 0;
      audit.clear();
      const sentAtMs = Date.now();
      const sentAt = performance.now();
      const response = await fetch(`${daemon.url}/v1/leaks/github`, {
        method: 'POST',
        headers,
        body,
      });
      answers.set(response.status, (answers.get(response.status) ?? 0) + 1);
      await response.body?.cancel();
      let deadAt: number | undefined;
      let notifiedAt: number | undefined;
      while (deadAt === undefined || notifiedAt === undefined) {
        const now = performance.now();
        if (now - sentAt > DELIVERY_LIMIT_MS)
          throw new Error(
            `leak ${String(number)} (${keyId}): not ${deadAt === undefined ? 'dead' : 'notified'} after ${String(DELIVERY_LIMIT_MS / 1000)} s`,
          );
        if (deadAt === undefined && !world.emulator.state.isLiveSecret(keyId, leaked)) {
          const stored = await storedFileValue(file);
          if (stored !== undefined && stored !== leaked && world.emulator.state.isLiveSecret(keyId, stored))
            deadAt = performance.now();
        }
        const arrivals = receiver.arrivals.get(keyId) ?? [];
        const told = audit
          .eventsNamed('consumer.notified')
          .filter(
            (event) =>
              Array.isArray(event.keyIds) && event.keyIds.includes(keyId) && event.consumerKind !== 'webhook',
          );
        const webhookAt = arrivals[noticesBefore];
        if (notifiedAt === undefined && webhookAt !== undefined && told.length >= 2) {
          // The audit lines carry wall-clock milliseconds: on the POST's performance.now() scale.
          const kubeAt = Math.max(...told.map((event) => sentAt + (Date.parse(event.time) - sentAtMs)));
          notifiedAt = Math.max(webhookAt, kubeAt);
        }
        await sleep(POLL_MS);
      }
      toDead.push(deadAt - sentAt);
      toNotified.push(notifiedAt - sentAt);
      failedConsumers += audit.eventsNamed('consumer.failed').length;
      // The daemon finishes the alert (resolves it at GitHub) before the next delivery.
      await daemon.idle();
    }

    const p = (values: number[], q: number): number => round(percentile(values, q), 1);
    return {
      figures: [
        { name: 'leak.timeToDeadMs.p50', value: p(toDead, 50), unit: 'ms' },
        {
          name: 'leak.timeToDeadMs.p99',
          value: p(toDead, 99),
          unit: 'ms',
          goal: { op: '<=', target: 2_000 },
        },
        { name: 'leak.timeToNotifiedMs.p50', value: p(toNotified, 50), unit: 'ms' },
        { name: 'leak.timeToNotifiedMs.p99', value: p(toNotified, 99), unit: 'ms' },
      ],
      details: {
        deliveries: count,
        answers: Object.fromEntries(answers),
        timeToDeadMs: {
          p50: p(toDead, 50),
          p90: p(toDead, 90),
          p99: p(toDead, 99),
          max: round(Math.max(...toDead), 1),
        },
        timeToNotifiedMs: {
          p50: p(toNotified, 50),
          p90: p(toNotified, 90),
          p99: p(toNotified, 99),
          max: round(Math.max(...toNotified), 1),
        },
        consumers: `per key: a webhook (a loopback receiver standing for a service that drops its cache on notice), its ExternalSecret, and the Deployment ${WORKLOAD} (restarted once per leak), on a real kube-apiserver with stand-in controllers`,
        consumerFailures: failedConsumers,
        settings: {
          pollMs: POLL_MS,
          keyroll:
            'keyroll daemon in the bench process (src/, not dist/), the GitHub intake against the fake GitHub, the file backend',
        },
      },
      notes: [
        `leak: ${String(count)} GitHub secret scanning deliveries, one at a time, to an in-process daemon; timeToDead = POST sent → the emulator refuses the leaked value and the file backend holds a live new one; timeToNotified = POST sent → the key's webhook told, its ExternalSecret annotated force-sync and its Deployment restarted (kube-apiserver, stand-in controllers polling every 25 ms)`,
      ],
    };
  } finally {
    await daemon?.shutdown();
    await controllers?.stop();
    await kube?.stop();
    await receiver.close();
    await github.close();
    await world.close();
  }
}
