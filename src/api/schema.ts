// Response schemas, one per body of docs/api.md. Third-party answers are parsed
// tolerantly (unknown fields are allowed, so a new API field breaks nothing) and strictly on the
// fields the spec marks required.
import { z } from 'zod';

export const Branding = z.enum(['brand_a', 'brand_b', 'none']);
export type Branding = z.infer<typeof Branding>;

export const Project = z.looseObject({
  projectId: z.string(),
  projectSlug: z.string(),
  projectName: z.string(),
  description: z.string().nullable(),
  organizationId: z.string(),
  organizationSlug: z.string(),
  dashboardURL: z.url(),
  products: z.looseObject({
    // The spec does not show the inner fields of the consent summary.
    consent: z.looseObject({}).nullable(),
  }),
});
export type Project = z.infer<typeof Project>;

export const ConsentSettings = z.looseObject({
  instanceId: z.string(),
  instanceSlug: z.string(),
  instanceName: z.string(),
  trustedOrigins: z.array(z.string()),
  branding: Branding,
  backendURL: z.string().nullable(),
  backendVersion: z.string(),
  dashboardURL: z.url(),
});
export type ConsentSettings = z.infer<typeof ConsentSettings>;

export const Pagination = z.looseObject({
  nextCursor: z.string().nullable(),
  hasMore: z.boolean(),
});
export type Pagination = z.infer<typeof Pagination>;

export const RolledKeyBody = z.looseObject({
  success: z.literal(true),
  data: z.looseObject({
    key: z.string().min(1),
    keyId: z.string().min(1),
  }),
});
export type RolledKeyBody = z.infer<typeof RolledKeyBody>;

export const ProjectListBody = z.looseObject({
  success: z.literal(true),
  data: z.array(Project),
  pagination: Pagination,
});
export type ProjectListBody = z.infer<typeof ProjectListBody>;

export const ProjectBody = z.looseObject({
  success: z.literal(true),
  data: Project,
});
export type ProjectBody = z.infer<typeof ProjectBody>;

export const ConsentSettingsBody = z.looseObject({
  success: z.literal(true),
  data: ConsentSettings,
});
export type ConsentSettingsBody = z.infer<typeof ConsentSettingsBody>;

// The spec lists the allowed error.code values; an unknown one is still accepted (as a string)
// so that a new code from the API is reported as sent rather than hidden behind "malformed".
export const API_ERROR_CODES = [
  'UNAUTHORIZED',
  'FORBIDDEN',
  'INSTANCE_LIMIT_REACHED',
  'PLAN_LIMIT_REACHED',
  'PLAN_REQUIRED',
  'INVALID_ORIGIN',
  'INVALID_REGION',
  'INVALID_PAYLOAD',
  'NOT_FOUND',
  'CONFLICT',
  'KEY_LIMIT_REACHED',
  'PAYLOAD_TOO_LARGE',
  'RATE_LIMITED',
  'SERVICE_UNAVAILABLE',
  'INTERNAL_ERROR',
] as const;

export const ErrorEnvelope = z.looseObject({
  success: z.boolean(),
  error: z.looseObject({
    code: z.string(),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});
export type ErrorEnvelope = z.infer<typeof ErrorEnvelope>;

/** A short description of what did not match, naming paths and rules, never the values. */
export function describeIssues(error: z.ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length === 0 ? '(body)' : issue.path.join('.')}: ${issue.message}`)
    .join('; ');
}
