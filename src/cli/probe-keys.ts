// `status --probe`: does each key's stored secret still work? The stored secret is what consumers
// read; a dead one is drift (the key was rolled outside keyroll). For a two-slot entry the value
// stored before the current one is probed too, when the backend keeps it (readPrevious): after an
// alternation it is the standby slot's secret, which consumers that have not refreshed yet use.
// Read-only and lock-free: nothing is recorded (run and the daemon record their probes under the
// key lock). Only verdicts leave this file, never a value.
import { withSecretScope } from '../audit/public/sanitize.ts';
import type { Secret } from '../audit/public/secret.ts';
import type { Backend, SecretStore, StoreTarget, StoredSecret } from '../backends/public/types.ts';
import { errorCode } from '../errors.ts';
import { primaryDestination, type KeyPolicy, type Policy } from '../policy/public/schema.ts';
import type { Runtime } from '../rotation/public/runtime.ts';
import { readStandbyValue, type StandbyVerdict } from '../rotation/public/standby.ts';
import type { ReadOnlyBackends } from './key-state.ts';

export type StoredVerdict = 'works' | 'dead' | 'nothing-stored' | 'probe-failed';
export type { StandbyVerdict };

export interface ProbeReport {
  /** ISO-8601 time of the probe. */
  at: string;
  /** The stored secret (for a two-slot entry: the active slot's). */
  stored: StoredVerdict;
  /** Two-slot entries: the verdict per slot id (the active slot's is `stored`). */
  slots?: Record<string, StoredVerdict | StandbyVerdict>;
  /** The error code of the first probe that failed (API unreachable, backend unreadable). */
  errorCode?: string;
}

export interface ProbeTarget {
  key: KeyPolicy;
  /** Two-slot entries: the active and standby slot ids (from the entry's bookkeeping). */
  active?: string | null;
  standby?: string | null;
}

type SecretProbe = (secret: Secret, organizationId: string) => Promise<'valid' | 'invalid'>;

/** The runtime's backends by policy name, so reads and probes share one instance per backend. */
export function backendsOfRuntime(policy: Policy, runtime: Runtime): ReadOnlyBackends {
  const byName = new Map<string, Backend>();
  for (const key of policy.keys) {
    const { destinations, fallbacks } = runtime.resolveKey(key);
    for (const destination of [...destinations, ...fallbacks])
      byName.set(destination.backendName, destination.backend);
  }
  return {
    get: (name) => {
      const backend = byName.get(name);
      if (!backend) throw new Error(`backend ${name} is not defined in the policy`);
      return backend;
    },
    // The runtime closes its backends.
    close: () => Promise.resolve(),
  };
}

export function secretProbeOf(runtime: Runtime): SecretProbe {
  return (secret, organizationId) => runtime.api.probeSecret(secret, { organizationId });
}

/** Probes one key's stored secret (and a two-slot entry's previous value) at its primary destination. */
export async function probeKey(
  target: ProbeTarget,
  backends: ReadOnlyBackends,
  probe: SecretProbe,
  now: Date,
): Promise<ProbeReport> {
  const { key } = target;
  const primary = primaryDestination(key);
  const backend = backends.get(primary.backend);
  // The secrets read here are forgotten by the sanitizer when the probe ends.
  return withSecretScope(async () => {
    const report: ProbeReport = { at: now.toISOString(), stored: 'nothing-stored' };
    const fail = (error: unknown): 'probe-failed' => {
      report.errorCode ??= errorCode(error);
      return 'probe-failed';
    };
    let stored: StoredSecret | undefined;
    try {
      stored = await backend.readSecret(primary.target);
      if (stored !== undefined) report.stored = await verdictOf(probe, stored.secret, key.organizationId);
    } catch (error) {
      report.stored = fail(error);
    }
    if (key.slots !== undefined && target.active && target.standby) {
      const standby = await probeStandby(
        { backend, target: primary.target },
        stored,
        target.standby,
        key.organizationId,
        probe,
      ).catch(fail);
      report.slots = { [target.active]: report.stored, [target.standby]: standby };
    }
    return report;
  });
}

async function probeStandby(
  primary: { backend: SecretStore; target: StoreTarget },
  stored: StoredSecret | undefined,
  standbyId: string,
  organizationId: string,
  probe: SecretProbe,
): Promise<StandbyVerdict> {
  // None kept, the current one again (a write repeated by hand), or another key's (standby.ts).
  const kept = await readStandbyValue(primary, stored, standbyId);
  return kept === undefined ? 'not-kept' : verdictOf(probe, kept.value.secret, organizationId);
}

async function verdictOf(
  probe: SecretProbe,
  secret: Secret,
  organizationId: string,
): Promise<'works' | 'dead'> {
  return (await probe(secret, organizationId)) === 'valid' ? 'works' : 'dead';
}
