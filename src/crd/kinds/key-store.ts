// KeyStore (namespaced) and ClusterKeyStore (cluster-scoped): one entry of the policy's `backends`
// each, as external-secrets splits SecretStore and ClusterSecretStore. A KeyStore serves the
// RotatedKeys of its own namespace only; a ClusterKeyStore serves the namespaces its conditions
// admit, each under its own path prefix, so two teams' secrets never share a path.
import { z } from 'zod';
import { BackendConfig } from '../../backends/public/config.ts';
import { NAMESPACE_MATCH_RULE, namespaceMatch } from './common.ts';
import { withRules } from './rules.ts';

/** What `pathPrefix` is when a condition names none: each namespace writes under its own name. */
export const DEFAULT_PATH_PREFIX = '{namespace}/';

export const StoreCondition = withRules(
  z.strictObject({
    ...namespaceMatch,
    pathPrefix: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Every destination path of an admitted namespace starts with this; {namespace} stands for the namespace. Default "{namespace}/".',
      ),
  }),
  [NAMESPACE_MATCH_RULE],
).describe('Namespaces that may use this store, and the paths they may write under.');
export type StoreCondition = z.infer<typeof StoreCondition>;

export const KeyStoreSpec = BackendConfig;
export type KeyStoreSpec = z.infer<typeof KeyStoreSpec>;

const conditions = {
  conditions: z
    .array(StoreCondition)
    .min(1, { error: 'a cluster store needs at least one condition (which namespaces may use it)' })
    .describe(
      'Which namespaces may use this store and under which paths; a namespace no condition admits is refused.',
    ),
};
const [aws, vault, file] = BackendConfig.options;
export const ClusterKeyStoreSpec = z.discriminatedUnion('kind', [
  aws.extend(conditions),
  vault.extend(conditions),
  file.extend(conditions),
]);
export type ClusterKeyStoreSpec = z.infer<typeof ClusterKeyStoreSpec>;
