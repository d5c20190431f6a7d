// A Vault Secrets Operator VaultStaticSecret (secrets.hashicorp.com/v1beta1; HashiCorp's
// vault-secrets-operator, read at v1.4.1: controllers/vaultstaticsecret_controller.go,
// controllers/predicates.go).
//
// Sync now: the operator's VaultStaticSecret controller reconciles on a generation change and on
// any change of the object's annotations or labels (syncableSecretPredicate, since v0.5.0: "Force
// sync on label/annotation updates"), so keyroll writes its own annotation (keyroll.io/sync-requested)
// and the operator reads Vault at once, without waiting for spec.refreshAfter. (Instant updates
// through Vault's event notifications, spec.syncConfig.instantUpdates, need Vault Enterprise.)
//
// Proof: with hmacSecretData (the operator's default) the reconcile computes the HMAC of the data it
// read and, when it differs from status.secretMAC, writes the Secret and then the new secretMAC to
// the status. A secretMAC other than the one read just before keyroll's ask (itself after the store)
// is therefore a sync of data read after the store: keyroll waits for that, read from the status as
// the API server holds it (a read, then a watch), never from the answer to its own patch. Without
// hmacSecretData the status carries no such value and nothing proves a sync: keyroll refuses the
// consumer (validate, and at once at run time) rather than report an unproved refresh.
import { ConsumerError } from '../errors.ts';
import type { KubeClient, KubeObject, KubeObjectRef } from '../kubernetes/client.ts';
import { waitForObject, type Verdict } from '../wait.ts';
import type { WatchedSecret } from './reloader.ts';

export const VAULT_STATIC_SECRET = {
  group: 'secrets.hashicorp.com',
  version: 'v1beta1',
  plural: 'vaultstaticsecrets',
} as const;

/** keyroll's annotation on the VaultStaticSecret: changing it makes the operator reconcile at once. */
export const SYNC_REQUESTED = 'keyroll.io/sync-requested';

export function vaultStaticSecretRef(namespace: string, name: string): KubeObjectRef {
  return { ...VAULT_STATIC_SECRET, namespace, name };
}

interface VaultStaticSecretSpec {
  hmacSecretData?: unknown;
  refreshAfter?: unknown;
  destination?: { name?: unknown; annotations?: unknown };
}

function specOf(object: KubeObject): VaultStaticSecretSpec {
  return typeof object.spec === 'object' && object.spec !== null ? object.spec : {};
}

function secretMac(object: KubeObject): string | undefined {
  const mac = (object.status as { secretMAC?: unknown } | undefined)?.secretMAC;
  return typeof mac === 'string' && mac !== '' ? mac : undefined;
}

/** A VaultStaticSecret whose syncs keyroll cannot prove (hmacSecretData: false), as the error to report; undefined when it can. */
export function syncUnprovable(object: KubeObject): ConsumerError | undefined {
  if (specOf(object).hmacSecretData !== false) return undefined;
  return new ConsumerError(
    'KR_CONSUMER_SYNC_UNPROVABLE',
    'hmacSecretData is false, so the operator records no status.secretMAC and no sync can be proved: remove hmacSecretData: false from its spec (true is the default)',
  );
}

/** spec.refreshAfter, for `validate` and `plan` (the operator's own period when keyroll does not ask). */
export function refreshAfterOf(object: KubeObject): string | undefined {
  const after = specOf(object).refreshAfter;
  return typeof after === 'string' && after !== '' ? after : undefined;
}

/** The Secret it writes, as Reloader sees it (reloader.ts): spec.destination.name and .annotations. */
export function destinationSecretOf(object: KubeObject): WatchedSecret {
  const destination = specOf(object).destination;
  const name = typeof destination?.name === 'string' ? destination.name : '';
  const annotations: Record<string, string> = {};
  const raw = destination?.annotations;
  if (typeof raw === 'object' && raw !== null)
    for (const [key, value] of Object.entries(raw)) if (typeof value === 'string') annotations[key] = value;
  return { name, annotations };
}

/** Synced once status.secretMAC differs from the one read before the ask. */
export function vaultStaticSecretVerdict(object: KubeObject, macBefore: string | undefined): Verdict<true> {
  const mac = secretMac(object);
  if (mac !== undefined && mac !== macBefore) return { done: true };
  const conditions = (object.status as { conditions?: unknown } | undefined)?.conditions;
  const synced = Array.isArray(conditions)
    ? (conditions as { type?: unknown; status?: unknown; message?: unknown }[]).find(
        (condition) => condition.type === 'SecretSynced',
      )
    : undefined;
  const said =
    synced !== undefined && typeof synced.message === 'string'
      ? ` (SecretSynced ${String(synced.status)}: ${synced.message})`
      : '';
  return { waiting: `status.secretMAC has not changed since keyroll asked${said}` };
}

/**
 * Asks the operator to sync now (keyroll's annotation, under the version read) and waits until its
 * status shows data it read after the ask. Throws ConsumerError.
 */
export async function syncVaultStaticSecret(
  client: KubeClient,
  ref: KubeObjectRef,
  options: { timeoutMs: number; now: () => number; onNotified: (atMs: number) => void; signal?: AbortSignal },
): Promise<{ notifiedAtMs: number }> {
  const object = await client.get(ref, options.signal);
  const unprovable = syncUnprovable(object);
  if (unprovable !== undefined) throw unprovable;
  const macBefore = secretMac(object);
  const askedAt = options.now();
  await client.patch(
    ref,
    { metadata: { annotations: { [SYNC_REQUESTED]: new Date(askedAt).toISOString() } } },
    'merge',
    options.signal,
  );
  const notifiedAtMs = options.now();
  options.onNotified(notifiedAtMs);
  await waitForObject(client, ref, (current) => vaultStaticSecretVerdict(current, macBefore), {
    timeoutMs: options.timeoutMs,
    what: `the sync of vaultStaticSecret ${ref.namespace}/${ref.name}`,
    ...(options.signal ? { signal: options.signal } : {}),
  });
  return { notifiedAtMs };
}
