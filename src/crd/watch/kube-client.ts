// The requests the reflector, the status writer and the Event recorder send, over
// @kubernetes/client-node's own authentication: each request is signed by the KubeConfig the rest of
// keyroll uses (the pod's service-account token, re-read as the kubelet rotates it, or a
// kubeconfig's certificate) and sent through its TLS dispatcher, the way client-node's Watch sends
// its own. Not client-node's ListWatch/informer: it relists on every watch end instead of resuming,
// and a list is one unpaginated request (docs/crds.md, "Watch and status").
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { fetch, type Response } from 'undici';
import { answerError, CrdError } from './errors.ts';
import { transportReason } from '../../errors.ts';
import {
  collectionPath,
  objectPath,
  type ObjectRef,
  type WatchedObject,
  type WatchedResource,
} from './resource.ts';

/** Per request: the API server answers a page, a get or a patch in well under this. */
export const REQUEST_TIMEOUT_MS = 30_000;

/**
 * The field manager keyroll's writes carry (`?fieldManager=`): metadata.managedFields then names
 * keyroll for the fields it wrote, so `kubectl get -o yaml --show-managed-fields` tells its status
 * from another writer's, and two installs' writes apart from a person's.
 */
export const FIELD_MANAGER = 'keyroll';

export interface ListPage {
  items: WatchedObject[];
  /** The collection's resourceVersion: a watch from it sees every change after this list. */
  resourceVersion: string;
  /** The token of the next page; absent on the last one. */
  continue?: string;
}

export type WatchEventType = 'ADDED' | 'MODIFIED' | 'DELETED' | 'BOOKMARK' | 'ERROR';

export interface WatchEvent {
  type: WatchEventType;
  /** The object; for ERROR, a metav1.Status ({ code, reason, message }). */
  object: WatchedObject & { code?: number; reason?: string; message?: string };
}

export interface WatchFrom {
  resourceVersion: string;
  /** The server closes the watch after this long (a normal end; the reflector resumes). */
  timeoutSeconds: number;
  /** No byte for this long: the connection is taken as dead (a silent network drop). */
  idleMs: number;
}

/** What the reflector needs of the API server (a stand-in implements it in unit tests). */
export interface WatchRequests {
  list(
    resource: WatchedResource,
    page: { limit: number; continue?: string },
    signal: AbortSignal,
  ): Promise<ListPage>;
  /** The events of one watch connection, until the server ends it; throws CrdError. */
  watch(resource: WatchedResource, from: WatchFrom, signal: AbortSignal): AsyncIterable<WatchEvent>;
}

/** What the status writer and the Event recorder need. */
export interface ObjectRequests {
  get(ref: ObjectRef, signal: AbortSignal): Promise<WatchedObject>;
  /** A JSON merge patch of the object's /status subresource; returns the object as stored. */
  patchStatus(ref: ObjectRef, patch: object, signal: AbortSignal): Promise<WatchedObject>;
  /** Creates an object in a collection (an Event); returns it as stored. */
  create(
    resource: WatchedResource,
    namespace: string,
    body: object,
    signal: AbortSignal,
  ): Promise<WatchedObject>;
}

export class KubeResourceClient implements WatchRequests, ObjectRequests {
  readonly #config: KubeConfig;
  readonly #timeoutMs: number;

  constructor(config: KubeConfig, options: { requestTimeoutMs?: number } = {}) {
    this.#config = config;
    this.#timeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  }

  async list(
    resource: WatchedResource,
    page: { limit: number; continue?: string },
    signal: AbortSignal,
  ): Promise<ListPage> {
    // No resourceVersion: the list is read from etcd at its latest revision (a consistent list),
    // the only kind that pages (resourceVersion=0 ignores limit).
    const query: Record<string, string> = { limit: String(page.limit) };
    if (page.continue !== undefined) query.continue = page.continue;
    const path = collectionPath(resource);
    const body = (await this.#json('GET', path, query, signal)) as {
      items?: WatchedObject[];
      metadata?: { resourceVersion?: string; continue?: string };
    };
    const next = body.metadata?.continue;
    return {
      items: body.items ?? [],
      resourceVersion: body.metadata?.resourceVersion ?? '',
      ...(next === undefined || next === '' ? {} : { continue: next }),
    };
  }

  async *watch(resource: WatchedResource, from: WatchFrom, signal: AbortSignal): AsyncIterable<WatchEvent> {
    const path = collectionPath(resource);
    const where = `watch ${path}`;
    const query = {
      watch: 'true',
      resourceVersion: from.resourceVersion,
      allowWatchBookmarks: 'true',
      timeoutSeconds: String(from.timeoutSeconds),
    };
    const idle = new IdleGuard(from.idleMs);
    const combined = AbortSignal.any([signal, idle.signal]);
    try {
      idle.touch();
      const response = await this.#send('GET', path, query, combined);
      if (response.status !== 200) throw answerError(where, response.status, await statusMessage(response));
      if (response.body === null) return;
      let buffered = '';
      const decoder = new TextDecoder();
      for await (const chunk of response.body) {
        idle.touch();
        buffered += decoder.decode(chunk as Uint8Array, { stream: true });
        let newline = buffered.indexOf('\n');
        while (newline >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (line !== '') yield parseEvent(line, where);
          newline = buffered.indexOf('\n');
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      throw asCrdError(error, where, idle.fired);
    } finally {
      idle.stop();
    }
  }

  async get(ref: ObjectRef, signal: AbortSignal): Promise<WatchedObject> {
    return (await this.#json('GET', objectPath(ref), {}, signal)) as WatchedObject;
  }

  async patchStatus(ref: ObjectRef, patch: object, signal: AbortSignal): Promise<WatchedObject> {
    const path = `${objectPath(ref)}/status`;
    return (await this.#json('PATCH', path, { fieldManager: FIELD_MANAGER }, signal, {
      body: JSON.stringify(patch),
      contentType: 'application/merge-patch+json',
    })) as WatchedObject;
  }

  async create(
    resource: WatchedResource,
    namespace: string,
    body: object,
    signal: AbortSignal,
  ): Promise<WatchedObject> {
    return (await this.#json(
      'POST',
      collectionPath(resource, namespace),
      { fieldManager: FIELD_MANAGER },
      signal,
      {
        body: JSON.stringify(body),
        contentType: 'application/json',
      },
    )) as WatchedObject;
  }

  async #json(
    method: 'GET' | 'PATCH' | 'POST',
    path: string,
    query: Record<string, string>,
    signal: AbortSignal,
    payload?: { body: string; contentType: string },
  ): Promise<unknown> {
    const where = `${method.toLowerCase()} ${path}`;
    const deadline = AbortSignal.timeout(this.#timeoutMs);
    try {
      const response = await this.#send(method, path, query, AbortSignal.any([signal, deadline]), payload);
      if (response.status < 200 || response.status > 299)
        throw answerError(where, response.status, await statusMessage(response));
      return await response.json();
    } catch (error) {
      throw asCrdError(error, where, deadline.aborted && !signal.aborted);
    }
  }

  async #send(
    method: 'GET' | 'PATCH' | 'POST',
    path: string,
    query: Record<string, string>,
    signal: AbortSignal,
    payload?: { body: string; contentType: string },
  ): Promise<Response> {
    const cluster = this.#config.getCurrentCluster();
    if (cluster === null)
      throw new CrdError('KR_CRD_UNREACHABLE', 'no Kubernetes cluster is configured', { where: path });
    const url = new URL(cluster.server + path);
    for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
    const context = new RequestContext(url.toString(), HttpMethod[method]);
    await this.#config.applySecurityAuthentication(context);
    const headers: Record<string, string> = { ...context.getHeaders(), accept: 'application/json' };
    if (payload !== undefined) headers['content-type'] = payload.contentType;
    return fetch(url, {
      method,
      headers,
      ...(payload === undefined ? {} : { body: payload.body }),
      dispatcher: context.getDispatcher(),
      signal,
    });
  }
}

/** Aborts when `idleMs` pass without a touch: a watch whose connection died without a reset. */
class IdleGuard {
  readonly #controller = new AbortController();
  readonly #idleMs: number;
  #timer: NodeJS.Timeout | undefined;
  fired = false;

  constructor(idleMs: number) {
    this.#idleMs = idleMs;
  }

  get signal(): AbortSignal {
    return this.#controller.signal;
  }

  touch(): void {
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.fired = true;
      this.#controller.abort();
    }, this.#idleMs);
    this.#timer.unref();
  }

  stop(): void {
    clearTimeout(this.#timer);
  }
}

function parseEvent(line: string, where: string): WatchEvent {
  let parsed: unknown;
  try {
    parsed = JSON.parse(line);
  } catch (error) {
    // Never the line itself in the message: it is an object's body.
    throw new CrdError('KR_CRD_API_ERROR', `${where}: the API server sent a line that is not JSON`, {
      where,
      cause: error,
    });
  }
  const event = parsed as { type?: unknown; object?: unknown };
  const type = event.type;
  if (
    (type === 'ADDED' ||
      type === 'MODIFIED' ||
      type === 'DELETED' ||
      type === 'BOOKMARK' ||
      type === 'ERROR') &&
    typeof event.object === 'object' &&
    event.object !== null
  )
    return { type, object: event.object };
  throw new CrdError('KR_CRD_API_ERROR', `${where}: the API server sent an event keyroll does not know`, {
    where,
  });
}

/** The message of the metav1.Status an error answer carries, when it carries one. */
async function statusMessage(response: Response): Promise<string | undefined> {
  try {
    const status = (await response.json()) as { message?: unknown };
    return typeof status.message === 'string' ? status.message : undefined;
  } catch {
    return undefined;
  }
}

function asCrdError(error: unknown, where: string, timedOut: boolean): CrdError {
  if (error instanceof CrdError) return error;
  if (timedOut)
    return new CrdError('KR_CRD_TIMEOUT', `${where}: no answer within the deadline`, { where, cause: error });
  const reason = transportReason(error);
  return new CrdError('KR_CRD_UNREACHABLE', `${where}: the API server could not be reached: ${reason}`, {
    where,
    cause: error,
  });
}
