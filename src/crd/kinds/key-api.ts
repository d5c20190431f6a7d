// ClusterKeyApi (cluster-scoped): the policy's `api` section (base URL, credential, methods,
// timeouts) plus the tenancy conditions: which namespaces may rotate keys of which
// organizations. The credential's reference resolves in keyroll's own pod, never a tenant's.
import { z } from 'zod';
import { ApiSettings } from '../../policy/public/schema.ts';
import { NAMESPACE_MATCH_RULE, namespaceMatch } from './common.ts';
import { withRules } from './rules.ts';

export const ApiCondition = withRules(
  z.strictObject({
    ...namespaceMatch,
    organizations: z
      .array(z.string().min(1))
      .min(1, { error: 'a condition needs at least one organization' })
      .describe('Organization ids the admitted namespaces may rotate keys of.'),
  }),
  [NAMESPACE_MATCH_RULE],
).describe('Namespaces that may use this API, and for which organizations.');
export type ApiCondition = z.infer<typeof ApiCondition>;

export const ClusterKeyApiSpec = ApiSettings.extend({
  conditions: z
    .array(ApiCondition)
    .min(1, { error: 'a ClusterKeyApi needs at least one condition (which namespaces may use it)' })
    .describe('Which namespaces may rotate keys of which organizations; no match is refused.'),
});
export type ClusterKeyApiSpec = z.infer<typeof ClusterKeyApiSpec>;
