// What the keyroll.io kinds share: the group and version, Kubernetes' label selector, and the
// tenancy conditions of the cluster-scoped objects (which namespaces may use them). The shapes
// follow Kubernetes' own types (metav1.LabelSelector) and external-secrets' ClusterSecretStore
// conditions, so a platform team reads them as it reads those.
import { z } from 'zod';
import { withRules, type CrossFieldRule } from './rules.ts';

export const GROUP = 'keyroll.io';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
/** `kubectl get keyroll` lists every kind of the group. */
export const CATEGORY = 'keyroll';

// Kubernetes' own name rules: a namespace is a DNS-1123 label, an object name a DNS-1123 subdomain.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export const NamespaceName = z
  .string()
  .max(63, { error: 'must be at most 63 characters (a Kubernetes namespace name)' })
  .regex(DNS_LABEL, {
    error:
      'must be a Kubernetes namespace name: lowercase letters, digits and "-", starting and ending with a letter or digit',
  });

export const ObjectName = z
  .string()
  .max(253, { error: 'must be at most 253 characters (a Kubernetes object name)' })
  .regex(DNS_SUBDOMAIN, {
    error:
      'must be a Kubernetes object name: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit',
  });

/** metav1.LabelSelectorRequirement; In and NotIn need values, Exists and DoesNotExist take none (as Kubernetes says). */
export const LabelSelectorRequirement = withRules(
  z.strictObject({
    key: z.string().min(1),
    operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
    values: z.array(z.string()).optional(),
  }),
  [
    {
      rule: "(self.operator == 'In' || self.operator == 'NotIn') == (has(self.values) && size(self.values) > 0)",
      message: 'In and NotIn need values; Exists and DoesNotExist take none',
      fieldPath: '.values',
      holds: (requirement) =>
        (requirement.operator === 'In' || requirement.operator === 'NotIn') ===
        (requirement.values ?? []).length > 0,
    },
  ],
);

/** metav1.LabelSelector: the requirements are ANDed; `{}` selects every namespace. */
export const LabelSelector = z
  .strictObject({
    matchLabels: z.record(z.string(), z.string()).optional(),
    matchExpressions: z.array(LabelSelectorRequirement).optional(),
  })
  .describe('A Kubernetes label selector over namespaces; {} selects every namespace.');
export type LabelSelector = z.infer<typeof LabelSelector>;

/** Which namespaces a condition admits: listed by name, selected by labels, or both (either admits). */
export const namespaceMatch = {
  namespaces: z.array(NamespaceName).optional().describe('Namespaces admitted by name.'),
  namespaceSelector: LabelSelector.optional().describe(
    'Namespaces admitted by their labels ({} admits every namespace).',
  ),
};

/** A condition admits nothing unless it names namespaces or selects them: none admits by omission. */
export const NAMESPACE_MATCH_RULE: CrossFieldRule<{
  namespaces?: string[] | undefined;
  namespaceSelector?: LabelSelector | undefined;
}> = {
  rule: 'has(self.namespaces) || has(self.namespaceSelector)',
  message: 'a condition needs namespaces or a namespaceSelector ({} selects every namespace)',
  holds: (condition) => condition.namespaces !== undefined || condition.namespaceSelector !== undefined,
};
