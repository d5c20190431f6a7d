// The `intake` section: which leak scanners may call the daemon (GitHub secret scanning,
// GitGuardian), the references of their webhook secrets and of the GitHub token, and which keys
// are only alerted about when they leak instead of rotated at once. A source is enabled by its
// block being present; without an `intake` section the daemon serves no leak endpoint (404).
import { z } from 'zod';
import type { DocPath } from './issue-text.ts';
import { SecretRef } from '../refs/secret-ref.ts';
import { AllowInsecureHttp, HttpUrl } from '../http/transport.ts';

export const GITHUB_API_URL = 'https://api.github.com';

/**
 * A REST base URL that keyroll appends paths to: a query string or fragment would end up before
 * the path it appends, so the token would go to another path than the alert's (issue 18).
 */
const ApiBaseUrl = HttpUrl.refine((url) => !url.includes('?') && !url.includes('#'), {
  error: 'must be a base URL without a query string (?) or fragment (#): keyroll appends /repos/... to it, and the token would be sent to another path',
});

export const GithubIntake = z
  .strictObject({
    webhookSecret: SecretRef.describe("Reference to the webhook's secret (GitHub signs each delivery with it: X-Hub-Signature-256); at least 32 bytes, e.g. openssl rand -hex 32 (the daemon refuses a shorter one)."),
    apiUrl: ApiBaseUrl.default(GITHUB_API_URL).describe('GitHub REST API base URL; GitHub Enterprise Server: https://HOST/api/v3. Default https://api.github.com.'),
    token: SecretRef.describe('Reference to a GitHub token that may read and resolve secret scanning alerts (fine-grained: "Secret scanning alerts" read and write; classic: repo or security_events).'),
    allowInsecureHttp: AllowInsecureHttp,
  })
  .describe('GitHub secret_scanning_alert webhooks at POST /v1/leaks/github: fetch the alert, identify the key, rotate it, prove the leaked value dead, resolve the alert.');

export const GitguardianIntake = z
  .strictObject({
    webhookSecret: SecretRef.describe("Reference to the custom webhook's signature token (GitGuardian-Signature); at least 32 bytes (the daemon refuses a shorter one: replace a shorter generated token in GitGuardian's settings)."),
    detectors: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe("GitGuardian detector names whose incidents concern keyroll's keys (e.g. your custom detector for the key format); incidents of other detectors are audited and ignored. Default: every detector."),
  })
  .describe('GitGuardian custom webhooks at POST /v1/leaks/gitguardian: verified, audited and alerted; GitGuardian sends no secret value, so a person supplies it (see docs/runbook.md).');

export const IntakeSettings = z
  .strictObject({
    github: GithubIntake.optional(),
    gitguardian: GitguardianIntake.optional(),
    alertOnly: z
      .array(z.string().min(1))
      .optional()
      .describe('Key entry ids whose leaks are alerted (critical) but not rotated automatically. Default none: every key is rotated when a scanner reports it.'),
  })
  .describe('Leak intake endpoints of the daemon (docs/runbook.md, "A secret leaked").');
export type IntakeSettings = z.infer<typeof IntakeSettings>;

/** alertOnly must name key entries: a misspelt id would silently leave that key rotated automatically. */
export function checkIntake(doc: { keys: readonly { id: string }[]; intake?: IntakeSettings | undefined }, add: (path: DocPath, message: string) => void): void {
  const ids = new Set(doc.keys.map((key) => key.id));
  (doc.intake?.alertOnly ?? []).forEach((id, index) => {
    if (!ids.has(id)) add(['intake', 'alertOnly', index], `${JSON.stringify(id)} is not the id of a key entry in keys`);
  });
}
