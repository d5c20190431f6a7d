// The daemon bench of test/support/daemon-bench.ts with the GitHub intake enabled against the fake.
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach } from 'vitest';
import { sign } from '@octokit/webhooks-methods';
import type { Daemon } from '../../../src/daemon/daemon.ts';
import type { DaemonOptions } from '../../../src/daemon/options.ts';
import {
  BOB_TRIGGER_SECRET,
  keyYaml,
  METRICS_TOKEN,
  policyYaml,
  postTrigger,
  TRIGGER_SECRET,
  type DaemonBench,
} from '../../support/daemon-bench.ts';
import { startDaemonBench } from '../../support/daemon-bench.ts';
import { startFakeGithub, type FakeGithub } from '../../support/fake-github.ts';

export const GITHUB_WEBHOOK_SECRET = 'github-webhook-secret-for-the-leak-intake-tests';
export const BILLING = 'key_demo_billing';
export const SEARCH = 'key_demo_search';

/** A fresh daemon bench and fake GitHub per test, closed after it; read them through the getters. */
export function useGithubBench(): { bench: () => DaemonBench; github: () => FakeGithub } {
  let bench: DaemonBench | undefined;
  let github: FakeGithub | undefined;
  beforeEach(async () => {
    bench = await startDaemonBench();
    github = await startFakeGithub();
  });
  afterEach(async () => {
    await github?.close();
    await bench?.close();
  });
  const need = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the GitHub bench is set up in beforeEach');
    return value;
  };
  return { bench: () => need(bench), github: () => need(github) };
}

export function intakePolicy(
  bench: DaemonBench,
  github: FakeGithub,
  keys = keyYaml(BILLING, 'schedule: "0 3 * * 1"'),
  extra = '',
): string {
  return `${policyYaml(bench.emulator.url, bench.secretsDir, keys)}intake:
  github:
    webhookSecret: env:KR_GITHUB_WEBHOOK_SECRET
    apiUrl: ${github.url}
    token: env:KR_GITHUB_TOKEN
${extra}`;
}

export async function startWithIntake(
  bench: DaemonBench,
  github: FakeGithub,
  options: Partial<DaemonOptions> = {},
): Promise<Daemon> {
  return bench.start({
    triggerKeys: [{ caller: 'alice', ref: 'env:KEYROLL_TRIGGER_KEY_ALICE' }],
    env: {
      KEYROLL_TRIGGER_KEY_ALICE: TRIGGER_SECRET,
      KEYROLL_TRIGGER_KEY_BOB: BOB_TRIGGER_SECRET,
      KEYROLL_METRICS_TOKEN: METRICS_TOKEN,
      KR_GITHUB_WEBHOOK_SECRET: GITHUB_WEBHOOK_SECRET,
      KR_GITHUB_TOKEN: github.token,
    },
    ...options,
  });
}

/** Rotates `keyId` once through the trigger so a secret is stored; returns it (the value that will "leak"). */
export async function storeFirstSecret(bench: DaemonBench, daemon: Daemon, keyId: string): Promise<string> {
  const answer = await postTrigger(daemon, { body: JSON.stringify({ keys: [keyId], reason: 'manual' }) });
  if (answer.status !== 202) throw new Error(`trigger answered ${answer.status}`);
  await daemon.idle();
  return bench.storedSecret(keyId);
}

export interface Delivery {
  status: number;
  json: Record<string, unknown>;
}

/** POSTs a webhook delivery the way GitHub does (event, delivery id, X-Hub-Signature-256 over the raw body). */
export async function deliver(
  daemon: Pick<Daemon, 'url'>,
  payload: unknown,
  options: { event?: string; delivery?: string; secret?: string; signature?: string } = {},
): Promise<Delivery> {
  const body = JSON.stringify(payload);
  const signature = options.signature ?? (await sign(options.secret ?? GITHUB_WEBHOOK_SECRET, body));
  const response = await fetch(`${daemon.url}/v1/leaks/github`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      'user-agent': 'GitHub-Hookshot/123abc',
      'x-github-event': options.event ?? 'secret_scanning_alert',
      'x-github-delivery': options.delivery ?? randomUUID(),
      'x-hub-signature-256': signature,
    },
    body,
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}
