// The rotation policy: `PolicyDocument` is the file as written (strict: an unknown field is an
// error, because a misspelt `maxAge` silently ignored would leave a key unrotated), and `Policy`
// is what the rest of keyroll reads, with defaults merged into every key and durations in ms.
// The JSON Schema in config/policy.schema.json is generated from `PolicyDocument`
// (scripts/generate-policy-schema.ts); test/policy/json-schema.test.ts keeps them equal.
import { z } from 'zod';
import { AlertSinkConfig } from '../alerts/public/config.ts';
import { BackendConfig } from '../backends/public/config.ts';
import type { StoreTarget } from '../backends/public/types.ts';
import type { PlainHttpEndpoint } from './endpoints.ts';
import type { PolicyIssue } from './errors.ts';
import { CronExpression, Duration, InstanceName, TimeZone } from './fields.ts';
import { SecretRef } from '../refs/public/secret-ref.ts';
import { AllowInsecureHttp, HttpUrl } from '../http/public/transport.ts';
import { IntakeSettings } from './intake.ts';
import {
  ConsumerInput,
  ConsumerSettingsInput,
  RefreshConsumers,
  type ConsumerRef,
  type ConsumerSettings,
} from './consumers.ts';

export { CronExpression, Duration, InstanceName, TimeZone } from './fields.ts';

const HttpMethod = z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

export const ApiCredential = z.discriminatedUnion('type', [
  z.strictObject({
    type: z.literal('bearer'),
    token: SecretRef.describe(
      "Reference to keyroll's bearer token (an owner/admin session or OAuth token; API keys cannot roll keys).",
    ),
  }),
  z.strictObject({
    type: z.literal('oauth2'),
    tokenUrl: HttpUrl,
    clientId: z.string().min(1),
    clientSecret: SecretRef,
    scope: z.string().min(1).optional(),
    audience: z
      .string()
      .min(1)
      .optional()
      .describe(
        'Sent as the form field `audience` of the token request (Auth0, Okta and others pick the API the token is for by it).',
      ),
    allowInsecureHttp: AllowInsecureHttp,
  }),
]);
export type ApiCredential = z.infer<typeof ApiCredential>;

export const ApiSettings = z.strictObject({
  baseUrl: HttpUrl.describe('Base URL of the key-management API.'),
  allowInsecureHttp: AllowInsecureHttp,
  credential: ApiCredential,
  methods: z
    .strictObject({
      roll: HttpMethod.default('POST'),
      listProjects: HttpMethod.default('GET'),
      updateProject: HttpMethod.default('PATCH'),
      updateConsent: HttpMethod.default('PATCH'),
    })
    .prefault({})
    .describe('HTTP method per operation; the API spec does not state them.'),
  timeouts: z
    .strictObject({
      headersMs: z.number().int().positive().default(10_000),
      bodyMs: z.number().int().positive().default(10_000),
    })
    .prefault({}),
  rateLimitPerMinute: z
    .number()
    .int()
    .positive()
    .default(600)
    .describe('Client-side ceiling on API calls per minute.'),
});
export type ApiSettings = z.infer<typeof ApiSettings>;

export const StoredField = z.enum(['keyId', 'organizationId', 'rotatedAt', 'rotationId']);

export const ValueShapeInput = z
  .strictObject({
    format: z
      .enum(['raw', 'json'])
      .optional()
      .describe('raw: the secret alone; json: an object with secretField plus fields. Default json.'),
    secretField: z
      .string()
      .min(1)
      .optional()
      .describe('Field holding the secret (JSON values, Vault data). Default apiKey.'),
    fields: z
      .array(StoredField)
      .optional()
      .describe('Facts stored beside the secret (json only). Default [keyId, organizationId, rotatedAt].'),
  })
  .describe('How the secret is laid out at the destination.');

export const DestinationInput = z.strictObject({
  backend: z.string().min(1).describe('Name of an entry in backends.'),
  path: z
    .string()
    .min(1)
    .describe('AWS: secret name or ARN; Vault: path under the KV v2 mount; file: path under the directory.'),
  shape: ValueShapeInput.optional(),
});

// The settings every key has; `defaults` sets them for all keys and each key may override any.
// `null` for schedule or maxAge switches off a value inherited from defaults.
const settingsFields = {
  schedule: CronExpression.nullable().optional(),
  timezone: TimeZone.optional(),
  maxAge: Duration.nullable().optional().describe('Rotate when the last rotation is at least this old.'),
  minInterval: Duration.optional().describe(
    'Minimum time between two rotations of a key (guards against rotation loops; leak/force rotations bypass it). Default 1h.',
  ),
  lockTtl: Duration.optional().describe(
    'How long a key lock holds before another runner may take it over; the holder keeps it alive while it works. At least one roll attempt plus the primary write with its retries plus clockSkew. Default 15m.',
  ),
  clockSkew: Duration.optional().describe(
    "How far runners' clocks may disagree: another runner's lock is taken over only this long after it expired, and a time in keyroll's bookkeeping further ahead is not trusted. Default 10s.",
  ),
  verify: z
    .strictObject({
      readBack: z
        .boolean()
        .optional()
        .describe('Read the stored secret back and compare digests. Default true.'),
      apiCall: z.boolean().optional().describe('Call the API with the new key. Default true.'),
    })
    .optional(),
  store: z
    .strictObject({
      attempts: z
        .number()
        .int()
        .min(1)
        .max(20)
        .optional()
        .describe('Write attempts per destination. Default 5.'),
      initialBackoff: Duration.optional().describe('Default 200ms.'),
      maxBackoff: Duration.optional().describe('Default 5s.'),
    })
    .optional(),
  notify: z
    .strictObject({
      onFailure: z
        .array(z.string().min(1))
        .optional()
        .describe('Alert sinks for failures. Default: every sink in alerts.sinks.'),
      onSuccess: z
        .array(z.string().min(1))
        .optional()
        .describe('Webhook sinks told about each success. Default none.'),
    })
    .optional(),
  driftCheck: Duration.nullable()
    .optional()
    .describe(
      'keyroll run probes the stored secret when its last probe (or rotation) is older than this; null switches the check off for run (the daemon probes every sweep). Default 1h.',
    ),
  onDrift: z
    .enum(['rotate', 'alert'])
    .optional()
    .describe(
      'What a stored secret that stopped working (drift) leads to: rotate heals it by a rotation, alert only reports it. Both audit and alert. Default rotate.',
    ),
  failures: z
    .strictObject({
      backoff: z
        .strictObject({
          initial: Duration.optional().describe(
            'Wait after the first failure before the next automatic attempt; doubles with each further failure. Default 1h.',
          ),
          cap: Duration.optional().describe('The longest wait between automatic attempts. Default 24h.'),
          jitter: z
            .number()
            .min(0)
            .max(1)
            .optional()
            .describe(
              'Each wait is shortened by a random share of up to this fraction, so keys that failed together do not retry together. Default 0.2.',
            ),
        })
        .optional(),
      quarantineAfter: z
        .number()
        .int()
        .min(1)
        .max(100)
        .optional()
        .describe(
          'Consecutive failures after which the key is quarantined: no automatic attempts until `keyroll resume` or a manual or leak rotation succeeds. Default 5.',
        ),
      remindEvery: Duration.optional().describe(
        'While a key keeps failing or stays quarantined, a reminder alert at most this often. Default 24h.',
      ),
    })
    .optional()
    .describe(
      'Backoff and quarantine of a key that keeps failing (a key left with an intent marker is never backed off: it is repaired every run and alerts every time).',
    ),
  refreshConsumers: RefreshConsumers.optional(),
};

export const Defaults = z.strictObject(settingsFields);

const ApiKeyId = z
  .string()
  .regex(/^[^\s/?#]+$/, { error: 'must be a key id without spaces, "/", "?" or "#"' });

export const KeyInput = z.strictObject({
  id: ApiKeyId.describe(
    'The API key id; for a slot entry, the name of the entry, which must not be an API key id.',
  ),
  organization: z
    .string()
    .min(1)
    .describe('Organization id the key belongs to (for a slot entry: both slots).'),
  destinations: z
    .array(DestinationInput)
    .min(1, { error: 'a key needs at least one destination' })
    .describe('Where the new secret is written; the first holds the lock and intent marker.'),
  fallbacks: z.array(DestinationInput).optional().describe('Tried in order when a destination stays down.'),
  labels: z.record(z.string().min(1), z.string()).optional(),
  ...settingsFields,
  consumers: z
    .array(ConsumerInput)
    .optional()
    .describe(
      'Who holds this key\'s stored value and is told when a new one is stored: ExternalSecrets synced, then workloads restarted once, in order (docs/kubernetes.md, "Consumers"); webhooks told at once.',
    ),
  // Last, so the fields of a single key read first (and unknown-field hints list them first).
  slots: z
    .array(ApiKeyId)
    .length(2, { error: 'must list exactly two API key ids' })
    .optional()
    .describe(
      'Two-slot alternation: two distinct API key ids of the organization serving one consumer. A rotation rolls the standby slot and stores it as the active one.',
    ),
  consumerRefresh: Duration.optional().describe(
    'Slot entries only (required there): the longest time a consumer may keep using a value it read. No slot is rolled sooner than this after it stopped being active.',
  ),
  scheduler: z
    .enum(['keyroll', 'aws-native'])
    .optional()
    .describe(
      "Who starts this key's scheduled rotations. keyroll (default): `keyroll run` and the daemon. aws-native: AWS Secrets Manager's own rotation, with keyroll as the rotation function (docs/aws-native.md); run and the daemon skip the key. aws-native needs a slot entry with one aws destination.",
    ),
});

export const Escrow = z.strictObject({
  directory: z.string().min(1),
  recipients: z
    .array(
      z.string().regex(/^age1[0-9a-z]{58}$/, {
        error: 'must be an age X25519 public key (age1 followed by 58 lowercase letters and digits)',
      }),
    )
    .min(1, { error: 'escrow needs at least one recipient' }),
});

export const PolicyDocument = z
  .strictObject({
    $schema: z
      .string()
      .optional()
      .describe('Editors may point this at policy.schema.json; keyroll ignores it.'),
    version: z.literal(1, { error: 'must be 1 (the only policy version this keyroll reads)' }),
    api: ApiSettings,
    backends: z
      .record(InstanceName, BackendConfig)
      .describe('Named backend instances the key destinations refer to.'),
    alerts: z.strictObject({ sinks: z.record(InstanceName, AlertSinkConfig).optional() }).optional(),
    escrow: Escrow.optional().describe(
      'Last resort when no destination takes the secret: sealed to these age recipients.',
    ),
    defaults: Defaults.optional(),
    intake: IntakeSettings.optional(),
    consumers: ConsumerSettingsInput.optional(),
    keys: z.array(KeyInput).min(1, { error: 'a policy needs at least one key' }),
  })
  .meta({ title: 'keyroll rotation policy' });
export type PolicyDocument = z.infer<typeof PolicyDocument>;
export type KeyInput = z.infer<typeof KeyInput>;
export type DestinationInput = z.infer<typeof DestinationInput>;

// ---- The resolved policy the engine, CLI and scheduler read.

export interface Destination {
  /** Name of the backend instance (a key of `Policy.backends`). */
  backend: string;
  target: StoreTarget;
}

/** The key's primary destination: it holds the lock and the intent marker, and its state is the key's. */
export function primaryDestination(key: Pick<KeyPolicy, 'destinations'>): Destination {
  const [primary] = key.destinations;
  return primary;
}

export interface KeyPolicy {
  id: string;
  organizationId: string;
  /** One or more; the first is the primary (holds the lock and the intent marker). */
  destinations: [Destination, ...Destination[]];
  fallbacks: Destination[];
  schedule?: string;
  /** IANA zone the schedule is read in. */
  timezone: string;
  maxAgeMs?: number;
  minIntervalMs: number;
  lockTtlMs: number;
  /** How far runners' clocks may disagree; a stale lock is taken over only this long after its expiry (invariant 9). */
  clockSkewMs: number;
  verify: { readBack: boolean; apiCall: boolean };
  store: { attempts: number; initialBackoffMs: number; maxBackoffMs: number };
  /** Alert sink names. */
  notify: { onFailure: string[]; onSuccess: string[] };
  labels: Record<string, string>;
  /** A slot entry's two API key ids (invariant 10); `id` then names the entry, not an API key. */
  slots?: readonly [string, string];
  /** Slot entries only: how long a consumer may keep a value it read; no slot is rolled sooner after it stopped being active. */
  consumerRefreshMs?: number;
  /** `keyroll run` probes the stored secret when its last probe or rotation is older than this; absent: run does not probe. */
  driftCheckMs?: number;
  /** What a stored secret that stopped working leads to (both audit and alert critical). */
  onDrift: 'rotate' | 'alert';
  /** Backoff and quarantine of a key that keeps failing; absent: the built-in defaults (DEFAULT_FAILURE_SETTINGS). */
  failures?: FailureSettings;
  /** `aws-native`: Secrets Manager schedules the key and calls keyroll's rotation function (src/lambda/); `run` and the daemon skip it. Absent: keyroll schedules it. */
  scheduler?: 'aws-native';
  /** Who holds the stored value and is told of a new one (invariant 12), in the order the policy lists them; absent: none. */
  consumers?: readonly ConsumerRef[];
  /** When the consumers are refreshed (policy/consumers.ts); absent: `needed`. */
  refreshConsumers?: 'needed' | 'always';
}

/** The `failures` settings of a key, durations in ms. */
export interface FailureSettings {
  backoffInitialMs: number;
  backoffCapMs: number;
  jitter: number;
  quarantineAfter: number;
  remindEveryMs: number;
}

export interface Policy {
  /** The policy file as the user named it. */
  file: string;
  api: ApiSettings;
  backends: Record<string, BackendConfig>;
  alerts: { sinks: Record<string, AlertSinkConfig> };
  escrow?: { directory: string; recipients: string[] };
  keys: KeyPolicy[];
  /** Leak intake endpoints of the daemon (src/policy/intake.ts); absent: none served. */
  intake?: IntakeSettings;
  /** How consumers are refreshed (src/policy/consumers.ts); absent: the defaults (CONSUMER_DEFAULTS). */
  consumers?: ConsumerSettings;
  /** What `validate` warns about (an endpoint with allowInsecureHttp: true), located like errors. */
  warnings?: readonly PolicyIssue[];
  /** Endpoints opted into plain http:// to another machine (endpoints.ts); `run` and the daemon warn about each at start. */
  plainHttp?: readonly PlainHttpEndpoint[];
}
