// ClusterKeyApi (cluster-scoped): the policy's `api` section (base URL, credential, methods,
// timeouts) plus the tenancy conditions: which namespaces may rotate keys of which
// organizations (and, where the platform team lists them, which API key ids). The credential's
// reference resolves in keyroll's own pod, never a tenant's.
import { z } from 'zod';
import { ApiSettings } from '../../policy/public/schema.ts';
import { NAMESPACE_MATCH_RULE, namespaceMatch } from './common.ts';
import { withRules } from './rules.ts';

/**
 * An API key id, or a prefix of one followed by `*` (`key_billing_*`): the characters of an API
 * key id (no space, "/", "?", "#"), and one `*` at the end at most. A lone `*` is refused: leaving
 * `keyIds` out already admits every key id, and says so plainly.
 */
export const KeyIdPattern = z.string().regex(/^[^\s/?#*]+\*?$/, {
  error: 'must be an API key id, or a prefix of one followed by "*" (key_billing_*)',
});

export const ApiCondition = withRules(
  z.strictObject({
    ...namespaceMatch,
    organizations: z
      .array(z.string().min(1))
      .min(1, { error: 'a condition needs at least one organization' })
      .describe('Organization ids the admitted namespaces may rotate keys of.'),
    // The API's roll names a key by id (`/v1/auth/keys/{keyId}/roll?organizationId=`) and the spec
    // does not say it refuses a key id outside the organization named, nor can keyroll list the
    // keys of an organization: without this list, an admitted namespace may name any key id and
    // keyroll would roll it, a key of another organization its credential reaches included.
    keyIds: z
      .array(KeyIdPattern)
      .min(1, { error: 'keyIds, when set, needs at least one id or prefix' })
      .optional()
      .describe(
        'API key ids the admitted namespaces may rotate: exact ids, or prefixes ending in "*" (key_billing_*). Absent: any key id of the organizations. Set it whenever keyroll\'s credential can roll keys of an organization this condition does not give the namespaces, or an organization is given to several teams.',
      ),
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
