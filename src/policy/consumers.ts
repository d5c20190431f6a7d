// Consumers in the policy (invariant 12): per key, who holds its stored value and must be told
// when a new one is stored (external-secrets objects, workloads, webhooks), and, once for the
// policy, how keyroll reaches Kubernetes and paces the restarts (timeouts, a cap on restarts at
// once, a restart window). src/consumers/ acts on them; this file only says what may be written.
import { z } from 'zod';
import type { DocPath } from './issue-text.ts';
import { Duration, TimeZone } from './fields.ts';

// Kubernetes' own rules for the names keyroll sends in API paths: a namespace is a DNS-1123
// label, an object name a DNS-1123 subdomain. Checked here, so a typo fails `validate`, not a
// leak rotation's delivery.
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

const KubeNamespace = z
  .string()
  .max(63, { error: 'must be at most 63 characters (a Kubernetes namespace name)' })
  .regex(DNS_LABEL, {
    error:
      'must be a Kubernetes namespace name: lowercase letters, digits and "-", starting and ending with a letter or digit',
  })
  .describe('The namespace of the object.');
const KubeName = z
  .string()
  .max(253, { error: 'must be at most 253 characters (a Kubernetes object name)' })
  .regex(DNS_SUBDOMAIN, {
    error:
      'must be a Kubernetes object name: lowercase letters, digits, "-" and ".", starting and ending with a letter or digit',
  })
  .describe('The name of the object.');

const kubeObject = <K extends string>(kind: K, description: string) =>
  z.strictObject({ kind: z.literal(kind), namespace: KubeNamespace, name: KubeName }).describe(description);

export const ConsumerInput = z.discriminatedUnion('kind', [
  kubeObject(
    'externalSecret',
    'An external-secrets ExternalSecret (external-secrets.io/v1): asked to sync now (its force-sync annotation), then waited for until its status shows a sync after the store.',
  ),
  kubeObject(
    'vaultStaticSecret',
    "A Vault Secrets Operator VaultStaticSecret (secrets.hashicorp.com/v1beta1): asked to sync now (an annotation change, which the operator reconciles at once), then waited for until its status.secretMAC shows the new data. Needs hmacSecretData (the operator's default).",
  ),
  kubeObject(
    'deployment',
    'A Deployment (apps/v1): restarted as `kubectl rollout restart` does, after every sync the key lists, then waited for until its rollout completes.',
  ),
  kubeObject('statefulSet', 'A StatefulSet (apps/v1): restarted and waited for like a deployment.'),
  kubeObject('daemonSet', 'A DaemonSet (apps/v1): restarted and waited for like a deployment.'),
  z
    .strictObject({
      kind: z.literal('webhook'),
      sink: z.string().min(1).describe('Name of a webhook sink in alerts.sinks.'),
    })
    .describe(
      'A webhook sink told, as soon as the key is stored, which key changed (never the secret), so a consumer outside Kubernetes can drop its cache.',
    ),
]);
export type ConsumerInput = z.infer<typeof ConsumerInput>;

const WEEKDAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'] as const;
export type Weekday = (typeof WEEKDAYS)[number];

const HOURS = /^([01]\d|2[0-3]):([0-5]\d)-(([01]\d|2[0-3]):([0-5]\d)|24:00)$/;

export const RestartWindowInput = z
  .strictObject({
    days: z
      .array(z.enum(WEEKDAYS))
      .min(1)
      .optional()
      .describe('Days on which restarts may start (sun, mon, tue, wed, thu, fri, sat). Default every day.'),
    hours: z
      .string()
      .regex(HOURS, { error: 'must be a time range such as "09:00-17:00" (24-hour clock, start before end)' })
      .describe('The hours in which restarts may start, e.g. "09:00-17:00" (start included, end excluded).'),
    timezone: TimeZone.optional().describe('IANA time zone the days and hours are read in. Default UTC.'),
  })
  .describe(
    'When restarts that can wait may start: after a two-slot rotation whose previous value still works. A value that died (a leak, a single key, a drift heal) restarts its workloads at once, whatever the window.',
  );

export const ConsumerSettingsInput = z
  .strictObject({
    kubernetes: z
      .strictObject({
        kubeconfig: z
          .string()
          .min(1)
          .optional()
          .describe(
            'A kubeconfig file. Default: the in-cluster service account when keyroll runs in a pod, else $KUBECONFIG or ~/.kube/config.',
          ),
        context: z
          .string()
          .min(1)
          .optional()
          .describe("The kubeconfig's context to use. Default its current context."),
      })
      .optional()
      .describe('How keyroll reaches the Kubernetes API server.'),
    syncTimeout: Duration.optional().describe(
      'How long to wait for an ExternalSecret to show a sync after the store. Default 2m.',
    ),
    rolloutTimeout: Duration.optional().describe(
      "How long to wait for a restarted workload's rollout to complete. Default 10m.",
    ),
    reloaderTimeout: Duration.optional().describe(
      'How long to wait, after its ExternalSecrets synced, for Stakater Reloader to restart a workload it watches before keyroll restarts it itself. Default 30s.',
    ),
    maxConcurrentRestarts: z
      .number()
      .int()
      .min(1)
      .max(100)
      .optional()
      .describe(
        'Workloads restarting at once, across every key of a run; the rest wait their turn in the order the policy lists them. Default 2.',
      ),
    restartWindow: RestartWindowInput.optional(),
  })
  .describe('How keyroll refreshes the consumers keys list (docs/kubernetes.md, "Consumers").');

/** What `refreshConsumers` may say: `needed` (default) refreshes when the value consumers hold died; `always` also after a slot rotation whose previous value still works. */
export const RefreshConsumers = z
  .enum(['needed', 'always'])
  .describe(
    'When the consumers of a key are refreshed. needed: after a rotation that killed the value they hold (a leak, any single-key rotation, a drift heal, a slot rotation that rolled the active slot). always: also after a scheduled slot rotation, within the restart window. Default needed.',
  );

// ---- What the rest of keyroll reads.

export type WorkloadKind = 'deployment' | 'statefulSet' | 'daemonSet';
export type SyncingKind = 'externalSecret' | 'vaultStaticSecret';
export type KubeConsumerKind = SyncingKind | WorkloadKind;

/** A Kubernetes object that consumes a key's value. */
export interface KubeConsumerRef {
  kind: KubeConsumerKind;
  namespace: string;
  name: string;
}

/** A webhook sink told of a key's new value. */
export interface WebhookConsumerRef {
  kind: 'webhook';
  sink: string;
}

export type ConsumerRef = KubeConsumerRef | WebhookConsumerRef;

export interface RestartWindow {
  /** Days restarts may start on, 0 = Sunday … 6 = Saturday. */
  days: readonly number[];
  /** Minutes after midnight: restarts may start from here … */
  fromMinute: number;
  /** … until here (excluded). */
  toMinute: number;
  timezone: string;
}

export interface ConsumerSettings {
  kubernetes: { kubeconfig?: string; context?: string };
  syncTimeoutMs: number;
  rolloutTimeoutMs: number;
  /** How long Reloader has to restart a workload it watches (kinds/reloader.ts) before keyroll does. */
  reloaderTimeoutMs: number;
  maxConcurrentRestarts: number;
  /** Absent: restarts may start at any time. */
  restartWindow?: RestartWindow;
}

export const CONSUMER_DEFAULTS = {
  syncTimeout: '2m',
  rolloutTimeout: '10m',
  reloaderTimeout: '30s',
  maxConcurrentRestarts: 2,
  refreshConsumers: 'needed',
} as const;

export function resolveRestartWindow(input: z.infer<typeof RestartWindowInput>): RestartWindow {
  const [from = '', to = ''] = input.hours.split('-');
  const minute = (time: string): number => {
    const [hours = '0', minutes = '0'] = time.split(':');
    return Number(hours) * 60 + Number(minutes);
  };
  return {
    days: (input.days ?? WEEKDAYS).map((day) => WEEKDAYS.indexOf(day)),
    fromMinute: minute(from),
    toMinute: minute(to),
    timezone: input.timezone ?? 'UTC',
  };
}

/** The text a consumer goes by in audit events, alerts and `status`: `deployment shop/checkout`, `webhook cache-drop`. */
export function consumerName(consumer: ConsumerRef): string {
  return consumer.kind === 'webhook'
    ? `webhook ${consumer.sink}`
    : `${consumer.kind} ${consumer.namespace}/${consumer.name}`;
}

/**
 * The rules the schema cannot state: a webhook consumer names a webhook sink, a key lists each
 * consumer once, and a restart window starts before it ends.
 */
export function checkConsumers(
  doc: {
    keys: readonly { consumers?: readonly ConsumerInput[] | undefined }[];
    alerts?: { sinks?: Record<string, { kind: string }> | undefined } | undefined;
    consumers?: z.infer<typeof ConsumerSettingsInput> | undefined;
  },
  add: (path: DocPath, message: string) => void,
): void {
  const sinks = doc.alerts?.sinks ?? {};
  doc.keys.forEach((key, index) => {
    const seen = new Map<string, number>();
    (key.consumers ?? []).forEach((consumer, at) => {
      const path: DocPath = ['keys', index, 'consumers', at];
      const name = consumerName(consumer);
      const first = seen.get(name);
      if (first === undefined) seen.set(name, at);
      else
        add(
          path,
          `lists ${name} again (already consumers[${String(first)}]); a consumer is refreshed once per rotation`,
        );
      if (consumer.kind !== 'webhook') return;
      const sink = Object.hasOwn(sinks, consumer.sink) ? sinks[consumer.sink] : undefined;
      const defined = Object.keys(sinks);
      if (sink === undefined)
        add(
          [...path, 'sink'],
          `sink ${JSON.stringify(consumer.sink)} is not defined in alerts.sinks (${defined.length === 0 ? 'none are defined' : `defined: ${defined.join(', ')}`})`,
        );
      else if (sink.kind !== 'webhook')
        add(
          [...path, 'sink'],
          `sink ${JSON.stringify(consumer.sink)} is a ${sink.kind} sink; a webhook consumer needs a sink of kind webhook`,
        );
    });
  });
  const window = doc.consumers?.restartWindow;
  if (window !== undefined && HOURS.test(window.hours)) {
    const { fromMinute, toMinute } = resolveRestartWindow(window);
    if (fromMinute >= toMinute)
      add(
        ['consumers', 'restartWindow', 'hours'],
        `starts at or after it ends (${window.hours}); a window runs from its start to its end on the same day`,
      );
  }
}
