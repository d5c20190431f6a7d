// Whether an ExternalSecret syncs when asked. external-secrets syncs on a metadata change (the
// force-sync annotation) only under some refresh settings (shouldRefresh in its controller):
//   refreshPolicy CreatedOnce (v0.16+)     never again once synced;
//   refreshPolicy OnChange (v0.16+)        on every change of spec or metadata: force-sync works;
//   refreshPolicy Periodic, or unset       every refreshInterval, and on a change of spec or
//                                          metadata, unless refreshInterval is 0 ("fetch once").
// keyroll reads them before it asks, so such a consumer fails at once with the fix, instead of a
// wait for the whole syncTimeout that no timeout could end.
import { ConsumerError } from '../errors.ts';
import type { KubeObject } from '../kubernetes/client.ts';

const UNIT_MS: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  μs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/** A Go duration string (metav1.Duration: "1h", "2h30m", "0", "0s", "-1m") in milliseconds; undefined when it is not one. */
export function goDurationMs(text: string): number | undefined {
  const match = /^([-+]?)(.*)$/.exec(text.trim());
  if (match === null) return undefined;
  const [, sign, body = ''] = match;
  if (body === '0') return 0;
  if (body === '') return undefined;
  let total = 0;
  let rest = body;
  while (rest !== '') {
    const part = /^(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/.exec(rest);
    if (part === null) return undefined;
    total += Number(part[1]) * (UNIT_MS[part[2] ?? ''] ?? Number.NaN);
    rest = rest.slice(part[0].length);
  }
  return Number.isNaN(total) ? undefined : sign === '-' ? -total : total;
}

/** Why a force-sync of this ExternalSecret would never be acted on, or undefined when it would. */
export function forceSyncOff(object: KubeObject): ConsumerError | undefined {
  const spec = (object.spec ?? {}) as { refreshPolicy?: unknown; refreshInterval?: unknown };
  const policy = typeof spec.refreshPolicy === 'string' ? spec.refreshPolicy : undefined;
  if (policy === 'CreatedOnce') {
    return new ConsumerError(
      'KR_CONSUMER_FORCE_SYNC_OFF',
      'its refreshPolicy is CreatedOnce: external-secrets never syncs it again, force-sync included; set refreshPolicy: OnChange (or Periodic with a refreshInterval above 0)',
    );
  }
  if (policy === 'OnChange') return undefined;
  // The CRD defaults refreshInterval to 1h: absent means the API server was told otherwise by no one.
  const interval = typeof spec.refreshInterval === 'string' ? goDurationMs(spec.refreshInterval) : undefined;
  if (interval !== undefined && interval <= 0) {
    return new ConsumerError(
      'KR_CONSUMER_FORCE_SYNC_OFF',
      `its refreshInterval is ${String(spec.refreshInterval)}: external-secrets fetches it once and ignores force-sync; set a refreshInterval above 0 (e.g. 1h), or on external-secrets 0.16+ refreshPolicy: OnChange`,
    );
  }
  return undefined;
}
