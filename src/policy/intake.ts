// The `intake` section: which leak scanners may call the daemon (GitHub secret scanning,
// GitGuardian), the references of their webhook secrets and of the GitHub token, and which keys
// are only alerted about when they leak instead of rotated at once. A source is enabled by its
// block being present; without an `intake` section the daemon serves no leak endpoint (404).
import { z } from 'zod';
import type { DocPath } from './issue-text.ts';
import { SecretRef } from '../refs/public/secret-ref.ts';
import { AllowInsecureHttp, HttpUrl } from '../http/public/transport.ts';
import { parseDuration as parseDurationMs } from './duration.ts';
import { Duration } from './fields.ts';

export const GITHUB_API_URL = 'https://api.github.com';
/**
 * How often the daemon lists the open alerts itself (docs/daemon.md, "Reconcile"): a leak whose
 * webhook never arrived waits at most this long. Five minutes is the sweep's interval too; a
 * reconcile of a quiet organization is one conditional request per scope (a 304, free against
 * the 5,000 requests an hour of a token), so 12 an hour leave the webhook path its budget.
 */
export const DEFAULT_GITHUB_RECONCILE_INTERVAL = '5m';

/** GitHub's login and repository name characters: they go into a URL path. */
const GithubName = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, {
  error: 'must be a GitHub login or slug (letters, digits, ".", "_", "-")',
});
const GithubRepository = z
  .string()
  .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*\/[A-Za-z0-9._-]+$/, { error: 'must be owner/repository' });

/**
 * A REST base URL that keyroll appends paths to: a query string or fragment would end up before
 * the path it appends, so the token would go to another path than the alert's (issue 18).
 */
const ApiBaseUrl = HttpUrl.refine((url) => !url.includes('?') && !url.includes('#'), {
  error:
    'must be a base URL without a query string (?) or fragment (#): keyroll appends /repos/... to it, and the token would be sent to another path',
});

export const GithubIntake = z
  .strictObject({
    webhookSecret: SecretRef.describe(
      "Reference to the webhook's secret (GitHub signs each delivery with it: X-Hub-Signature-256); at least 32 bytes, e.g. openssl rand -hex 32 (the daemon refuses a shorter one).",
    ),
    apiUrl: ApiBaseUrl.default(GITHUB_API_URL).describe(
      'GitHub REST API base URL; GitHub Enterprise Server: https://HOST/api/v3. Default https://api.github.com.',
    ),
    token: SecretRef.describe(
      'Reference to a GitHub token that may read and resolve secret scanning alerts (fine-grained: "Secret scanning alerts" read and write; classic: repo or security_events).',
    ),
    allowInsecureHttp: AllowInsecureHttp,
    secretTypes: z
      .array(
        z.string().regex(/^[A-Za-z0-9_.-]+$/, {
          error: 'must be a secret type slug (letters, digits, "_", ".", "-")',
        }),
      )
      .min(1)
      .optional()
      .describe(
        "Secret types of keyroll's keys as GitHub names them (the `secret_type` of an alert: a partner pattern's slug, or your custom pattern's). The reconcile lists only these; required with organizations, repositories or enterprises.",
      ),
    organizations: z
      .array(GithubName)
      .min(1)
      .optional()
      .describe(
        'Organizations whose open alerts the daemon lists itself (GET /orgs/{org}/secret-scanning/alerts): at start and every reconcileInterval.',
      ),
    repositories: z
      .array(GithubRepository)
      .min(1)
      .optional()
      .describe(
        'Repositories (owner/name) whose open alerts the daemon lists itself, where the token may not read a whole organization.',
      ),
    enterprises: z
      .array(GithubName)
      .min(1)
      .optional()
      .describe(
        "Enterprises (slug) whose open alerts the daemon lists itself (GitHub Enterprise Cloud; the token's user must be a member of the enterprise, and only the organizations where it is an owner or security manager are listed).",
      ),
    reconcileInterval: Duration.default(DEFAULT_GITHUB_RECONCILE_INTERVAL).describe(
      'How often the daemon lists the open alerts of organizations, repositories and enterprises to handle those whose webhook never arrived. Default 5m; at least 1s.',
    ),
  })
  .describe(
    'GitHub secret_scanning_alert webhooks at POST /v1/leaks/github: fetch the alert, identify the key, rotate it, prove the leaked value dead, resolve the alert.',
  );

export type GithubIntake = z.infer<typeof GithubIntake>;

export const GitguardianIntake = z
  .strictObject({
    webhookSecret: SecretRef.describe(
      "Reference to the custom webhook's signature token (GitGuardian-Signature); at least 32 bytes (the daemon refuses a shorter one: replace a shorter generated token in GitGuardian's settings).",
    ),
    detectors: z
      .array(z.string().min(1))
      .min(1)
      .optional()
      .describe(
        "GitGuardian detector names whose incidents concern keyroll's keys (e.g. your custom detector for the key format); incidents of other detectors are audited and ignored. Default: every detector.",
      ),
  })
  .describe(
    'GitGuardian custom webhooks at POST /v1/leaks/gitguardian: verified, audited and alerted; GitGuardian sends no secret value, so a person supplies it (see docs/runbook.md).',
  );

export const IntakeSettings = z
  .strictObject({
    github: GithubIntake.optional(),
    gitguardian: GitguardianIntake.optional(),
    alertOnly: z
      .array(z.string().min(1))
      .optional()
      .describe(
        'Key entry ids whose leaks are alerted (critical) but not rotated automatically. Default none: every key is rotated when a scanner reports it.',
      ),
  })
  .describe('Leak intake endpoints of the daemon (docs/runbook.md, "A secret leaked").');
export type IntakeSettings = z.infer<typeof IntakeSettings>;

/** The shortest reconcile interval: below it a reconcile would spend the token's budget on polling. */
export const MIN_GITHUB_RECONCILE_INTERVAL_MS = 1_000;

/** alertOnly must name key entries: a misspelt id would silently leave that key rotated automatically. */
export function checkIntake(
  doc: { keys: readonly { id: string }[]; intake?: IntakeSettings | undefined },
  add: (path: DocPath, message: string) => void,
): void {
  const ids = new Set(doc.keys.map((key) => key.id));
  (doc.intake?.alertOnly ?? []).forEach((id, index) => {
    if (!ids.has(id))
      add(['intake', 'alertOnly', index], `${JSON.stringify(id)} is not the id of a key entry in keys`);
  });
  const github = doc.intake?.github;
  if (github === undefined) return;
  // Without a filter the list holds every secret type: GitHub's own tokens, cloud keys, the lot.
  // keyroll would fetch each one's secret and compare it with every destination, for nothing.
  if (reconcileScopes(github) > 0 && github.secretTypes === undefined) {
    add(
      ['intake', 'github', 'secretTypes'],
      "is required with organizations, repositories or enterprises: the reconcile lists only the secret types of keyroll's keys",
    );
  }
  if (parseDurationMs(github.reconcileInterval) < MIN_GITHUB_RECONCILE_INTERVAL_MS) {
    add(
      ['intake', 'github', 'reconcileInterval'],
      `must be at least ${String(MIN_GITHUB_RECONCILE_INTERVAL_MS / 1000)}s: a shorter one spends the token's rate limit on polling`,
    );
  }
}

/** How many places the reconcile lists (0: it is off). */
export function reconcileScopes(
  github: Pick<GithubIntake, 'organizations' | 'repositories' | 'enterprises'>,
): number {
  return (
    (github.organizations?.length ?? 0) +
    (github.repositories?.length ?? 0) +
    (github.enterprises?.length ?? 0)
  );
}
