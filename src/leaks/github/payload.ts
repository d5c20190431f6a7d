// What keyroll reads of GitHub's answers: tolerant parsing of a third party's shapes (unknown
// fields pass), only the fields the flow needs. The webhook's alert carries no secret; the REST
// alert does, in `secret`. Shapes: GitHub's OpenAPI description (@octokit/openapi), schemas
// `webhook-secret-scanning-alert-*` and `secret-scanning-alert-with-metadata` (the tests hold an
// extract of them: test/fixtures/github/).
import { z } from 'zod';

/** The actions that mean "a secret may be live in the open": the rest (resolved, assigned, ...) are ignored. */
export const GITHUB_LEAK_ACTIONS = ['created', 'reopened', 'publicly_leaked', 'validated'] as const;

export const GithubAlertWebhook = z.looseObject({
  action: z.string().min(1),
  alert: z.looseObject({
    number: z.number().int().positive(),
    secret_type: z.string().optional(),
    html_url: z.string().optional(),
    // `validated` is sent for every validity change; only a secret that still works is urgent.
    validity: z.string().nullable().optional(),
  }),
  repository: z.looseObject({
    name: z.string().min(1),
    full_name: z.string().min(1),
    owner: z.looseObject({ login: z.string().min(1) }),
  }),
});
export type GithubAlertWebhook = z.infer<typeof GithubAlertWebhook>;

export const GithubAlert = z.looseObject({
  number: z.number().int().positive(),
  state: z.enum(['open', 'resolved']),
  secret: z.string().optional(),
  secret_type: z.string().optional(),
  html_url: z.string().optional(),
});
export type GithubAlert = z.infer<typeof GithubAlert>;

/** The alert's identity in the REST API. */
export interface GithubAlertRef {
  owner: string;
  repo: string;
  number: number;
}
