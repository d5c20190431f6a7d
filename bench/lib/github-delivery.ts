// A GitHub secret scanning delivery as GitHub sends it (the `created` event of an alert the fake
// GitHub holds, signed with the webhook secret), and the file backend's stored value: what the
// leak benchmarks (leak, leak-real, ha) share.
import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { sign } from '@octokit/webhooks-methods';
import { secretScanningWebhook } from '../../test/support/fake-github.ts';

export interface SignedDelivery {
  body: string;
  headers: Record<string, string>;
}

/** The signed `secret_scanning_alert` delivery of alert `number` of octo-org/shop, with a fresh delivery id. */
export async function secretScanningDelivery(webhookSecret: string, number: number): Promise<SignedDelivery> {
  const body = JSON.stringify(secretScanningWebhook('created', { owner: 'octo-org', repo: 'shop', number }));
  return {
    body,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'GitHub-Hookshot/bench',
      'x-github-event': 'secret_scanning_alert',
      'x-github-delivery': randomUUID(),
      'x-hub-signature-256': await sign(webhookSecret, body),
    },
  };
}

/** The apiKey a file-backend destination holds, or undefined while it holds none. */
export async function storedFileValue(file: string): Promise<string | undefined> {
  try {
    const value = (JSON.parse(await readFile(file, 'utf8')) as { apiKey?: unknown }).apiKey;
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}
