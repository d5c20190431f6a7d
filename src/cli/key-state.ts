// Reads what `plan` and `status` show for each key, without changing anything: the primary
// destination's bookkeeping and the due decision.
import { errorCode, errorMessage } from '../errors.ts';
import { decideDue, type DueDecision } from '../policy/due.ts';
import type { KeyPolicy, Policy } from '../policy/schema.ts';
import { createBackend } from '../backends/registry.ts';
import type { Backend, KeyState } from '../backends/types.ts';

export interface KeyView {
  key: KeyPolicy;
  state?: KeyState;
  decision?: DueDecision;
  /** Set when the state could not be read (backend down, denied). */
  readError?: { errorCode: string; message: string };
}

export interface ReadOnlyBackends {
  get(name: string): Backend;
  close(): Promise<void>;
}

export async function openBackends(policy: Policy): Promise<ReadOnlyBackends> {
  const backends = new Map<string, Backend>();
  for (const [name, config] of Object.entries(policy.backends)) backends.set(name, await createBackend(name, config, {}));
  return {
    get: (name) => {
      const backend = backends.get(name);
      if (!backend) throw new Error(`backend ${name} is not defined in the policy`);
      return backend;
    },
    close: async () => {
      for (const backend of backends.values()) await backend.close();
    },
  };
}

export async function viewKeys(policy: Policy, backends: ReadOnlyBackends, now: Date, keys: readonly KeyPolicy[] = policy.keys): Promise<KeyView[]> {
  const views: KeyView[] = [];
  for (const key of keys) {
    const primary = key.destinations[0];
    if (!primary) continue;
    try {
      const state = await backends.get(primary.backend).readState(primary.target);
      const decision = decideDue(key, { ...(state.lastRotatedAt ? { lastRotatedAt: state.lastRotatedAt } : {}), ...(state.intent ? { intent: state.intent } : {}) }, now);
      views.push({ key, state, decision });
    } catch (error) {
      views.push({ key, readError: { errorCode: errorCode(error), message: errorMessage(error) } });
    }
  }
  return views;
}
