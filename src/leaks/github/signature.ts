// GitHub signs each delivery with the webhook secret: X-Hub-Signature-256 = sha256=<HMAC-SHA256
// of the raw body>, checked here with @octokit/webhooks-methods (constant time) before a byte of
// the body is parsed. GitHub signs no timestamp, so a captured delivery stays valid: replays are
// bounded by the delivery id record and, above all, by the alert's state fetched from GitHub.
import { verify } from '@octokit/webhooks-methods';
import type { Secret } from '../../audit/secret.ts';

export const GITHUB_SIGNATURE_HEADER = 'x-hub-signature-256';
export const GITHUB_EVENT_HEADER = 'x-github-event';
export const GITHUB_DELIVERY_HEADER = 'x-github-delivery';

export type GithubSignatureCheck = 'ok' | 'missing-signature' | 'malformed-signature' | 'bad-signature';

export async function checkGithubSignature(secret: Secret, rawBody: Buffer, header: string | undefined): Promise<GithubSignatureCheck> {
  if (header === undefined || header === '') return 'missing-signature';
  if (!/^sha256=[0-9a-f]{64}$/.test(header)) return 'malformed-signature';
  // GitHub sends UTF-8 JSON; a body that is not UTF-8 cannot match what GitHub signed.
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(rawBody);
  } catch {
    return 'bad-signature';
  }
  if (text === '') return 'bad-signature';
  return (await verify(secret.reveal(), text, header)) ? 'ok' : 'bad-signature';
}
