// What keyroll reads of a GitGuardian custom-webhook event (tolerant: GitGuardian adds fields).
// The incident names the detector, the incident page, severity and validity, and two hashes:
// `secret_hash` (GitGuardian's internal identifier) and `hmsl_hash` (the HasMySecretLeaked
// fingerprint). Neither is the value, and keyroll computes neither, so it cannot tell from the
// event alone which key leaked (docs/runbook.md says what is and is not automated).
import { z } from 'zod';

/** Events that mean a secret may be live in the open; the rest (assigned, resolved, ...) are ignored. */
export const GITGUARDIAN_LEAK_ACTIONS = [
  'incident_triggered',
  'incident_reopened',
  'incident_regression',
] as const;

export const GitguardianEvent = z.looseObject({
  action: z.string().min(1),
  incident: z
    .looseObject({
      id: z.union([z.number().int(), z.string().min(1)]),
      detector: z.looseObject({ name: z.string().min(1), display_name: z.string().optional() }).optional(),
      gitguardian_url: z.string().optional(),
      severity: z.string().nullable().optional(),
      validity: z.string().nullable().optional(),
      occurrences_count: z.number().int().optional(),
    })
    .optional(),
});
export type GitguardianEvent = z.infer<typeof GitguardianEvent>;
