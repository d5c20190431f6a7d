// The daemon's keys from keyroll.io objects (`keyroll daemon --keys-from kubernetes`, issue 31;
// docs/crds.md "The daemon in objects mode"). One reflector per kind and one for the namespaces
// (their labels feed the conditions' namespaceSelectors) hold what the API server holds; each
// build hands every object to objectsToPolicy and resolves its document as a policy file's is, so
// the daemon swaps it in through its own reload path (one generation, swapped whole) and the
// scheduler, launcher and rotation never know where a key came from. The settings every key
// shares (alerts, escrow, intake, consumers, which ClusterKeyApi) come from the daemon's policy
// file, read at start and on SIGHUP.
//
// Changes are debounced: a build waits for OBJECT_CHANGE_DEBOUNCE.quietMs without a relevant
// change, and never more than maxDelayMs after the first one. `kubectl apply -f dir/` or an Argo CD
// sync writes a ClusterKeyApi, stores and many keys within a second; each swap costs a runtime,
// a preflight of every destination and a sweep, so one swap for the burst, not one per object.
// Changes that cannot change the policy are not changes: a status write or an annotation keeps
// `metadata.generation` (the status writer's own patches would otherwise rebuild after every
// rotation), and a namespace matters only through its labels. A build whose document equals the
// one in force swaps nothing.
import type { KubeConfig } from '@kubernetes/client-node';
import type { AuditLog } from '../audit/public/events.ts';
import { GROUP, VERSION } from '../crd/public/kinds/common.ts';
import { KeyrollObject, KINDS, KIND_NAMES, type KindName } from '../crd/public/kinds/kinds.ts';
import { buildPolicyFromObjects, type BuiltPolicy } from '../crd/public/policy/build-policy.ts';
import { refName, type Refusal } from '../crd/public/policy/refusal.ts';
import { KubeResourceClient, type WatchRequests } from '../crd/public/watch/kube-client.ts';
import { Reflector, type WatchChange } from '../crd/public/watch/reflector.ts';
import type { WatchedObject, WatchedResource } from '../crd/public/watch/resource.ts';
import type { Policy } from '../policy/public/schema.ts';
import { loadSharedSettings, type SharedSettingsFile } from '../policy/public/settings-file.ts';
import type { BackoffPolicy } from '../rotation/public/backoff.ts';
import { policyWithout } from './object-deletions.ts';
import { tellObserver, type ObjectsObserver } from './objects-observer.ts';

/** How the daemon takes its keys from keyroll.io objects (DaemonOptions.keysFrom). */
export interface KeysFromObjects {
  /** keyroll's client configuration: the pod's service account, or a kubeconfig. */
  kubeConfig: KubeConfig;
  /** keyroll's own namespace: its KeyStores are the platform team's and may hold local references. */
  namespace: string;
  /**
   * Told of each generation, each key's outcome and leadership. Absent: the daemon writes each
   * RotatedKey's status and Events and serves rotate-now itself (daemon/object-status.ts), unless
   * writeStatus is false.
   */
  observer?: ObjectsObserver;
  /** False: the objects are only read (no status, Events or rotate-now). Default true. */
  writeStatus?: boolean;
  /** Overrides OBJECT_CHANGE_DEBOUNCE (tests). */
  debounce?: { quietMs: number; maxDelayMs: number };
  /** Overrides the reflectors' backoff (tests). */
  watchBackoff?: BackoffPolicy;
  /** A stand-in of the API server's list and watch (unit tests); default: kubeConfig's. */
  requests?: WatchRequests;
}

export const OBJECT_CHANGE_DEBOUNCE = { quietMs: 1_000, maxDelayMs: 5_000 } as const;

type Watched = KindName | 'Namespace';

function resourceOf(kind: Watched): WatchedResource {
  if (kind === 'Namespace') return { group: '', version: 'v1', plural: 'namespaces' };
  return { group: GROUP, version: VERSION, plural: KINDS[kind].plural };
}

/** One build: the policy, which RotatedKey became which key, and every refusal. */
type Built = BuiltPolicy;

export class ObjectKeys {
  readonly #options: KeysFromObjects;
  readonly #audit: AuditLog;
  /** The settings file (the daemon's --policy). */
  readonly #file: string;
  readonly #reflectors = new Map<Watched, Reflector>();
  readonly #stop = new AbortController();
  /** Told of each generation and each RotatedKey change; set by the daemon (observe), else the options'. */
  #observer: ObjectsObserver | undefined;
  readonly #running: Promise<void>[] = [];
  #synced = false;
  #settings: SharedSettingsFile | undefined;
  readonly #builds = new WeakMap<Policy, Built>();
  readonly #parsed = new WeakMap<WatchedObject, ReturnType<typeof KeyrollObject.safeParse>>();
  #inForce: Built | undefined;
  /** The refusals audited for what is in force (refusalId): each is audited once, not at every resync. */
  #refused = new Set<string>();
  #timer: NodeJS.Timeout | undefined;
  #firstPendingAt: number | undefined;
  #onChange: () => void = () => undefined;

  private constructor(options: KeysFromObjects, audit: AuditLog, file: string) {
    this.#options = options;
    this.#audit = audit;
    this.#file = file;
    this.#observer = options.observer;
    const requests = options.requests ?? new KubeResourceClient(options.kubeConfig);
    for (const kind of [...KIND_NAMES, 'Namespace'] as const) {
      this.#reflectors.set(
        kind,
        new Reflector({
          requests,
          resource: resourceOf(kind),
          audit,
          ...(options.watchBackoff === undefined ? {} : { backoff: options.watchBackoff }),
          onChange: (change) => {
            this.#changed(kind, change);
          },
        }),
      );
    }
  }

  /**
   * Starts every reflector and resolves once each has listed its resource. A list that fails is
   * audited (crd.watch.failed) and retried with backoff; `signal` (the daemon's shutdown) ends the wait.
   */
  static async start(
    options: KeysFromObjects,
    audit: AuditLog,
    file: string,
    signal: AbortSignal,
  ): Promise<ObjectKeys> {
    const keys = new ObjectKeys(options, audit, file);
    for (const reflector of keys.#reflectors.values()) keys.#running.push(reflector.run(keys.#stop.signal));
    const stopped = new Promise<void>((resolve) => {
      signal.addEventListener('abort', () => {
        resolve();
      });
    });
    await Promise.race([Promise.all([...keys.#reflectors.values()].map((r) => r.synced)), stopped]);
    if (signal.aborted) {
      await keys.stop();
      throw new Error('the daemon stopped before the keyroll.io objects were listed');
    }
    keys.#synced = true;
    return keys;
  }

  /** The component told of generations and RotatedKey changes (the daemon's status writer). */
  observe(observer: ObjectsObserver | undefined): void {
    this.#observer = observer;
  }

  /** The RotatedKeys as the watch holds them, by `namespace/name`. */
  rotatedKeys(): { get(key: string): WatchedObject | undefined } {
    const reflector = this.#reflectors.get('RotatedKey');
    return { get: (key) => reflector?.get(key) };
  }

  /** Called (debounced) after a change that may change the policy. */
  listen(onChange: () => void): void {
    this.#onChange = onChange;
  }

  /** At start and on SIGHUP: reads the settings file again, then builds from the objects held. */
  async load(): Promise<Policy> {
    const settings = await loadSharedSettings(this.#file);
    const built = this.#build(settings);
    // Kept only once the build succeeded: a bad settings file leaves the last good one for object changes.
    this.#settings = settings;
    return built.policy;
  }

  /**
   * After an object change: the policy to swap in, or undefined when it equals the one in force
   * (then only the refusals may have changed, and they are settled here).
   */
  rebuild(): Policy | undefined {
    const settings = this.#settings;
    if (settings === undefined) return undefined;
    const built = this.#build(settings);
    if (built.fingerprint !== this.#inForce?.fingerprint) return built.policy;
    this.#settle(built);
    return undefined;
  }

  /**
   * After a build (or its prepare) failed: `policy`, the one in force, without the keys whose
   * RotatedKey is gone; undefined when none is. Its own build, so that the daemon's inForce of it
   * audits each deletion (crd.key_deleted) and tells the observer, as a swap of a full build does;
   * its fingerprint is no build's, so the next change builds and prepares in full again.
   */
  withoutDeleted(policy: Policy): Policy | undefined {
    const built = this.#builds.get(policy);
    const rotatedKeys = this.#reflectors.get('RotatedKey');
    if (built === undefined || rotatedKeys === undefined) return undefined;
    const deleted = [...built.keys].filter(([object]) => rotatedKeys.get(object) === undefined);
    if (deleted.length === 0) return undefined;
    const narrowed = policyWithout(policy, new Set(deleted.map(([, keyId]) => keyId)));
    const keys = new Map([...built.keys].filter(([object]) => rotatedKeys.get(object) !== undefined));
    this.#builds.set(narrowed, {
      policy: narrowed,
      keys,
      refusals: built.refusals,
      fingerprint: JSON.stringify({ narrowed: built.fingerprint, deleted }),
    });
    return narrowed;
  }

  /** The daemon swapped `policy` in: what it drops is audited, its refusals too, and the observer told. */
  inForce(policy: Policy): void {
    const built = this.#builds.get(policy);
    if (built !== undefined) this.#settle(built);
  }

  async stop(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#onChange = () => undefined;
    this.#stop.abort();
    await Promise.all(this.#running);
  }

  #changed(kind: Watched, change: WatchChange): void {
    const observer = this.#observer;
    if (kind === 'RotatedKey' && observer?.onObjectChange !== undefined)
      tellObserver(this.#audit, () => {
        observer.onObjectChange?.(change);
      });
    if (change.type === 'modified' && !mayChangePolicy(kind, change.previous, change.object)) return;
    // Before the first sync the start builds from everything anyway.
    if (!this.#synced || this.#stop.signal.aborted) return;
    const now = performance.now();
    this.#firstPendingAt ??= now;
    const { quietMs, maxDelayMs } = this.#options.debounce ?? OBJECT_CHANGE_DEBOUNCE;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#firstPendingAt = undefined;
        this.#onChange();
      },
      Math.max(0, Math.min(quietMs, this.#firstPendingAt + maxDelayMs - now)),
    );
  }

  #build(settings: SharedSettingsFile): Built {
    const built = buildPolicyFromObjects(
      {
        objects: (kind) => this.#reflectors.get(kind)?.objects().values() ?? [],
        namespaces: () => this.#reflectors.get('Namespace')?.objects().values() ?? [],
      },
      settings,
      { keyrollNamespace: this.#options.namespace, file: this.#file, parse: (raw) => this.#parse(raw) },
    );
    this.#builds.set(built.policy, built);
    return built;
  }

  /**
   * An object as the kinds' schemas read it, parsed once per version: the reflector keeps an
   * unchanged object's copy, so a build after one change does not parse the other thousand again.
   */
  #parse(raw: WatchedObject): ReturnType<typeof KeyrollObject.safeParse> {
    let parsed = this.#parsed.get(raw);
    if (parsed === undefined) {
      parsed = KeyrollObject.safeParse(raw);
      this.#parsed.set(raw, parsed);
    }
    return parsed;
  }

  #settle(built: Built): void {
    const previous = this.#inForce;
    const rotatedKeys = this.#reflectors.get('RotatedKey');
    for (const [object, keyId] of previous?.keys ?? []) {
      // A key refused now is audited as refused below; one whose object is gone was deleted.
      if (built.keys.has(object) || rotatedKeys?.get(object) !== undefined) continue;
      this.#audit.emit('crd.key_deleted', {
        object,
        keyId,
        next: 'keyroll no longer rotates this key; the stored secret is left as it is',
      });
    }
    const refused = new Set<string>();
    for (const refusal of built.refusals) {
      const id = this.#refusalId(refusal);
      refused.add(id);
      if (this.#refused.has(id)) continue;
      this.#audit.emit('crd.key_refused', {
        kind: refusal.object.kind,
        object: refName(refusal.object),
        reason: refusal.reason,
        message: refusal.message,
      });
    }
    const changed =
      previous === undefined ||
      !sameEntries(previous.keys, built.keys) ||
      refused.size !== this.#refused.size ||
      [...refused].some((id) => !this.#refused.has(id));
    this.#refused = refused;
    this.#inForce = built;
    const observer = this.#observer;
    if (changed && observer !== undefined)
      tellObserver(this.#audit, () => {
        observer.onGeneration(built.keys, built.refusals);
      });
  }

  /** A refusal of one version of the object: a new generation refused again is audited again. */
  #refusalId(refusal: Refusal): string {
    const { kind } = refusal.object;
    const at = refName(refusal.object);
    const generation = this.#reflectors.get(kind)?.get(at)?.metadata?.generation;
    return JSON.stringify([kind, at, generation, refusal.reason, refusal.message]);
  }
}

/** Whether a modified object can change the policy: a new spec (generation), or a namespace's labels. */
function mayChangePolicy(kind: Watched, previous: WatchedObject, object: WatchedObject): boolean {
  if (kind === 'Namespace')
    return JSON.stringify(previous.metadata?.labels ?? {}) !== JSON.stringify(object.metadata?.labels ?? {});
  const before = previous.metadata?.generation;
  const after = object.metadata?.generation;
  return before === undefined || after === undefined || before !== after;
}

function sameEntries(a: ReadonlyMap<string, string>, b: ReadonlyMap<string, string>): boolean {
  return a.size === b.size && [...a].every(([name, id]) => b.get(name) === id);
}
