// A reflector for one resource, as client-go's tools/cache.Reflector does it and
// @kubernetes/client-node's ListWatch does not (it relists after every watch end, and lists in one
// unpaginated request): LIST in pages, then WATCH from the list's resourceVersion with bookmarks; a
// watch that ends (the server's timeoutSeconds, a cut connection, a silent one) is opened again
// from the last resourceVersion seen, bookmarks included, so nothing is listed twice and no change
// is missed; only "410 Gone" (the API server no longer holds that resourceVersion) costs a full
// list, whose differences come out as changes: an object deleted while the watch was away comes
// out as `deleted`. Failures back off (jittered, capped) and are audited without object bodies.
import type { AuditLog } from '../../audit/public/events.ts';
import { catalogueCode, errorMessage } from '../../errors.ts';
import { backoffDelay, sleep, type BackoffPolicy } from '../../rotation/public/backoff.ts';
import { answerError, CrdError } from './errors.ts';
import type { WatchEvent, WatchRequests } from './kube-client.ts';
import { describeResource, objectKey, type WatchedObject, type WatchedResource } from './resource.ts';

export type WatchChange =
  | { type: 'added'; key: string; object: WatchedObject }
  | { type: 'modified'; key: string; object: WatchedObject; previous: WatchedObject }
  | { type: 'deleted'; key: string; object: WatchedObject };

export interface SyncedInfo {
  /** How many objects the list found. */
  objects: number;
  /** False for the first list; true for a relist after 410 Gone. */
  relist: boolean;
  resourceVersion: string;
}

export interface ReflectorOptions {
  requests: WatchRequests;
  resource: WatchedResource;
  audit: AuditLog;
  /** Called for each change, after the reflector's own map holds it. */
  onChange?: (change: WatchChange) => void;
  /** Called after each complete list (the first, and each relist after 410 Gone). */
  onSynced?: (info: SyncedInfo) => void;
  /** Objects per list page. */
  pageSize?: number;
  /** How long the server keeps one watch open; default 5 to 10 minutes, jittered (client-go's). */
  watchTimeoutSeconds?: number;
  backoff?: BackoffPolicy;
  random?: () => number;
}

/** client-go's reflector backoff: 800 ms, doubling, capped at 30 s. */
export const WATCH_BACKOFF: BackoffPolicy = { initialMs: 800, maxMs: 30_000 };
const PAGE_SIZE = 500;
const MIN_WATCH_SECONDS = 300;
/** A watch silent this long past its own timeout is a dead connection. */
const IDLE_MARGIN_MS = 30_000;

export interface ReflectorCounts {
  /** Complete lists: 1 after the start, one more per 410 Gone. */
  lists: number;
  /** Watch connections opened. */
  watches: number;
}

export class Reflector {
  readonly #options: ReflectorOptions;
  readonly #random: () => number;
  #objects = new Map<string, WatchedObject>();
  /** The last resourceVersion seen (list, event or bookmark); undefined: a list is due. */
  #resourceVersion: string | undefined;
  #failures = 0;
  #expiredInARow = 0;
  readonly #counts: ReflectorCounts = { lists: 0, watches: 0 };
  readonly #synced: Promise<void>;
  #markSynced: () => void = () => undefined;

  constructor(options: ReflectorOptions) {
    this.#options = options;
    this.#random = options.random ?? Math.random;
    this.#synced = new Promise((resolve) => {
      this.#markSynced = resolve;
    });
  }

  /** Resolves once the first list is complete and every object in it was emitted as `added`. */
  get synced(): Promise<void> {
    return this.#synced;
  }

  get resourceVersion(): string | undefined {
    return this.#resourceVersion;
  }

  get counts(): Readonly<ReflectorCounts> {
    return { ...this.#counts };
  }

  get(key: string): WatchedObject | undefined {
    return this.#objects.get(key);
  }

  /** Every object held, by `namespace/name`. */
  objects(): ReadonlyMap<string, WatchedObject> {
    return this.#objects;
  }

  /** Lists and watches until `signal` aborts; never throws (failures are audited and retried). */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      try {
        if (this.#resourceVersion === undefined) await this.#list(signal);
        await this.#watch(signal);
      } catch (error) {
        if (!(await this.#recover(error, signal))) return;
      }
    }
  }

  /** After a failure: relist on 410, else back off. False once `signal` aborted (the run ends). */
  async #recover(error: unknown, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false;
    const resource = describeResource(this.#options.resource);
    if (error instanceof CrdError && error.code === 'KR_CRD_EXPIRED') {
      this.#options.audit.emit('crd.watch.resync', {
        resource,
        resourceVersion: this.#resourceVersion,
        error: errorMessage(error),
      });
      this.#resourceVersion = undefined;
      this.#expiredInARow++;
      // A 410 right after a fresh list means the server is unwell: wait as for any failure.
      if (this.#expiredInARow < 2) return true;
    }
    this.#failures++;
    const retryInMs = backoffDelay(this.#options.backoff ?? WATCH_BACKOFF, this.#failures, this.#random);
    this.#options.audit.emit('crd.watch.failed', {
      resource,
      errorCode: catalogueCode(error),
      error: errorMessage(error),
      attempt: this.#failures,
      retryInMs,
    });
    try {
      await sleep(retryInMs, signal);
      return true;
    } catch {
      return false;
    }
  }

  async #list(signal: AbortSignal): Promise<void> {
    const fresh = new Map<string, WatchedObject>();
    let resourceVersion: string | undefined;
    let next: string | undefined;
    do {
      const page = await this.#options.requests.list(
        this.#options.resource,
        { limit: this.#options.pageSize ?? PAGE_SIZE, ...(next === undefined ? {} : { continue: next }) },
        signal,
      );
      // Every page of one list is read at the first page's resourceVersion.
      resourceVersion ??= page.resourceVersion;
      for (const item of page.items) {
        const key = objectKey(item);
        if (key !== undefined) fresh.set(key, item);
      }
      next = page.continue;
    } while (next !== undefined);
    const relist = this.#counts.lists > 0;
    const changes = differences(this.#objects, fresh);
    this.#objects = fresh;
    this.#resourceVersion = resourceVersion;
    this.#counts.lists++;
    this.#failures = 0;
    for (const change of changes) this.#emit(change);
    const info: SyncedInfo = { objects: fresh.size, relist, resourceVersion };
    this.#options.audit.emit('crd.watch.synced', {
      resource: describeResource(this.#options.resource),
      ...info,
      added: changes.filter((change) => change.type === 'added').length,
      modified: changes.filter((change) => change.type === 'modified').length,
      deleted: changes.filter((change) => change.type === 'deleted').length,
    });
    this.#options.onSynced?.(info);
    this.#markSynced();
  }

  async #watch(signal: AbortSignal): Promise<void> {
    const from = this.#resourceVersion;
    if (from === undefined) return;
    const timeoutSeconds =
      this.#options.watchTimeoutSeconds ?? Math.round(MIN_WATCH_SECONDS * (1 + this.#random()));
    this.#counts.watches++;
    const events = this.#options.requests.watch(
      this.#options.resource,
      { resourceVersion: from, timeoutSeconds, idleMs: timeoutSeconds * 1000 + IDLE_MARGIN_MS },
      signal,
    );
    for await (const event of events) this.#apply(event);
  }

  #apply(event: WatchEvent): void {
    const { object } = event;
    if (event.type === 'ERROR') {
      const where = `watch of ${describeResource(this.#options.resource)}`;
      throw answerError(where, object.code ?? 500, object.message);
    }
    // Any event proves the watch works: the next failure starts the backoff from its beginning.
    this.#failures = 0;
    this.#expiredInARow = 0;
    const resourceVersion = object.metadata?.resourceVersion;
    if (resourceVersion !== undefined && resourceVersion !== '') this.#resourceVersion = resourceVersion;
    if (event.type === 'BOOKMARK') return;
    const key = objectKey(object);
    if (key === undefined) return;
    const previous = this.#objects.get(key);
    if (event.type === 'DELETED') {
      if (previous === undefined) return;
      this.#objects.delete(key);
      this.#emit({ type: 'deleted', key, object });
      return;
    }
    this.#objects.set(key, object);
    if (previous === undefined) this.#emit({ type: 'added', key, object });
    else if (previous.metadata?.resourceVersion !== resourceVersion)
      this.#emit({ type: 'modified', key, object, previous });
  }

  #emit(change: WatchChange): void {
    try {
      this.#options.onChange?.(change);
    } catch (error) {
      // A handler's bug must not stop the watch (every other object's changes still come).
      this.#options.audit.emit('crd.watch.failed', {
        resource: describeResource(this.#options.resource),
        what: 'handler',
        change: change.type,
        object: change.key,
        errorCode: catalogueCode(error),
        error: errorMessage(error),
      });
    }
  }
}

/** What changed from `before` to `after`, as a watch would have said it. */
function differences(
  before: ReadonlyMap<string, WatchedObject>,
  after: ReadonlyMap<string, WatchedObject>,
): WatchChange[] {
  const changes: WatchChange[] = [];
  for (const [key, object] of after) {
    const previous = before.get(key);
    if (previous === undefined) changes.push({ type: 'added', key, object });
    else if (previous.metadata?.resourceVersion !== object.metadata?.resourceVersion)
      changes.push({ type: 'modified', key, object, previous });
  }
  for (const [key, object] of before) if (!after.has(key)) changes.push({ type: 'deleted', key, object });
  return changes;
}
