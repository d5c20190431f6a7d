// RotatedKey: one key entry of the policy as a namespaced object. Its spec is the policy's
// `KeyInput`, field for field, except what comes from shared objects: the API (apiRef, a
// ClusterKeyApi) and the backends (storeRef, a KeyStore of the namespace or a ClusterKeyStore).
// A consumer names no namespace: it is the object's own, so a team cannot name another team's
// workloads (issue 31, tenancy).
import { z } from 'zod';
import { ConsumerInput } from '../../policy/public/consumers.ts';
import { DestinationInput, KeyInput } from '../../policy/public/schema.ts';
import { ObjectName } from './common.ts';
import { withRules, type CrossFieldRule } from './rules.ts';

export const StoreRef = z
  .strictObject({
    kind: z
      .enum(['KeyStore', 'ClusterKeyStore'])
      .describe(
        'KeyStore: a store of the same namespace; ClusterKeyStore: a cluster store whose conditions admit it.',
      ),
    name: ObjectName,
  })
  .describe("The store the secret is written to (the policy's `backend`).");
export type StoreRef = z.infer<typeof StoreRef>;

export const StoreDestination = DestinationInput.omit({ backend: true }).extend({ storeRef: StoreRef });
export type StoreDestination = z.infer<typeof StoreDestination>;

export const ApiRef = z
  .strictObject({ name: ObjectName })
  .describe(
    'The ClusterKeyApi whose API and credential roll this key; its conditions must admit the namespace and organization.',
  );
export type ApiRef = z.infer<typeof ApiRef>;

// The policy's consumer kinds, each without `namespace`: a consumer lives in the object's namespace.
const [externalSecret, vaultStaticSecret, deployment, statefulSet, daemonSet, webhook] =
  ConsumerInput.options;
export const NamespacedConsumer = z.discriminatedUnion('kind', [
  externalSecret.omit({ namespace: true }),
  vaultStaticSecret.omit({ namespace: true }),
  deployment.omit({ namespace: true }),
  statefulSet.omit({ namespace: true }),
  daemonSet.omit({ namespace: true }),
  webhook,
]);
export type NamespacedConsumer = z.infer<typeof NamespacedConsumer>;

// Rules the policy states in its semantic checks (src/policy/check.ts, slots.ts), said again in CEL
// so the API server refuses the object at `kubectl apply`, not keyroll minutes later. Without a
// shared `defaults`, a key's own schedule or maxAge is the only one it has.
interface SpecFields {
  schedule?: string | undefined;
  maxAge?: string | undefined;
  slots?: readonly string[] | undefined;
  consumerRefresh?: string | undefined;
}
const SPEC_RULES: readonly CrossFieldRule<SpecFields>[] = [
  {
    rule: 'has(self.schedule) || has(self.maxAge)',
    message: 'has neither a schedule nor a maxAge, so it would never be due; set one',
    holds: (spec) => spec.schedule !== undefined || spec.maxAge !== undefined,
  },
  {
    rule: '!has(self.slots) || has(self.consumerRefresh)',
    message:
      'consumerRefresh is required with slots: the longest time a consumer may keep using a value it read',
    fieldPath: '.consumerRefresh',
    holds: (spec) => spec.slots === undefined || spec.consumerRefresh !== undefined,
  },
  {
    rule: 'has(self.slots) || !has(self.consumerRefresh)',
    message: 'consumerRefresh applies only to slot entries (with slots: [KEY_A, KEY_B])',
    fieldPath: '.consumerRefresh',
    holds: (spec) => spec.slots !== undefined || spec.consumerRefresh === undefined,
  },
  {
    rule: '!has(self.slots) || self.slots[0] != self.slots[1]',
    message: 'slots must name two different API key ids',
    fieldPath: '.slots',
    holds: (spec) => spec.slots === undefined || spec.slots[0] !== spec.slots[1],
  },
];

interface ShapeFields {
  format?: 'raw' | 'json' | undefined;
  fields?: readonly string[] | undefined;
}
const SHAPE_RULES: readonly CrossFieldRule<ShapeFields>[] = [
  {
    rule: "!has(self.format) || self.format != 'raw' || !has(self.fields) || size(self.fields) == 0",
    message: 'only json values carry fields beside the secret; remove fields or use format: json',
    fieldPath: '.fields',
    holds: (shape) => shape.format !== 'raw' || (shape.fields ?? []).length === 0,
  },
];

// Bounds the policy file does without: the API server estimates a CEL rule's cost over the
// longest list a request could hold, and refuses the CRD when a rule inside an unbounded list
// may cost too much (the shape rule did, 1.15x over budget). No key needs more.
const MAX_DESTINATIONS = 10;

const keyFields = KeyInput.shape;
// schedule and maxAge are not nullable here: `null` switches off a value inherited from
// `defaults`, and a RotatedKey inherits none.
const schedule = keyFields.schedule.unwrap().unwrap();
const maxAge = keyFields.maxAge.unwrap().unwrap();
const shape = withRules(DestinationInput.shape.shape.unwrap(), SHAPE_RULES);
const destination = StoreDestination.extend({ shape: shape.optional() });

export const RotatedKeySpec = withRules(
  KeyInput.omit({ destinations: true, fallbacks: true, scheduler: true }).extend({
    apiRef: ApiRef,
    destinations: z
      .array(destination)
      .min(1, { error: 'a key needs at least one destination' })
      .max(MAX_DESTINATIONS, { error: `a key has at most ${String(MAX_DESTINATIONS)} destinations` })
      .describe('Where the new secret is written; the first holds the lock and intent marker.'),
    fallbacks: z
      .array(destination)
      .max(MAX_DESTINATIONS, { error: `a key has at most ${String(MAX_DESTINATIONS)} fallbacks` })
      .optional()
      .describe('Tried in order when a destination stays down.'),
    schedule: schedule.optional(),
    maxAge: maxAge.optional().describe('Rotate when the last rotation is at least this old.'),
    consumers: z
      .array(NamespacedConsumer)
      .optional()
      .describe(
        "Who holds this key's stored value, in the object's own namespace: ExternalSecrets synced, then workloads restarted once, in order; webhooks told at once.",
      ),
  }),
  SPEC_RULES,
);
export type RotatedKeySpec = z.infer<typeof RotatedKeySpec>;
