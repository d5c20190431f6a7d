// The object a shared replay record lives in (kube-replay-record.ts): one ConfigMap per source,
// rendered by the chart, read with `get` and written with `update` (PUT under its resourceVersion),
// the only two verbs the chart's Role grants, on those names only. keyroll never creates it: a
// Role cannot limit `create` by name, and a missing object is a deployment error to see at start.
// Every request has a deadline, so an API server that accepts the connection and never answers
// holds a request no longer than that (the request is then refused, 503).
import {
  ApiException,
  CoreV1Api,
  type ConfigurationOptions,
  type KubeConfig,
  V1ConfigMap,
  V1ObjectMeta,
} from '@kubernetes/client-node';
import type { ReplayObject, ReplayObjectState } from './kube-replay-record.ts';
import { ReplayRecordError } from './replay-claim.ts';
import { transportReason } from '../errors.ts';
import { clientNodeRequest } from '../http/public/client-node-request.ts';

/** Per request: a get or an update answers in milliseconds; this bounds a hung one well inside a sender's timeout (GitHub's is 10 s). */
export const REPLAY_REQUEST_TIMEOUT_MS = 4_000;

export interface ConfigMapRef {
  namespace: string;
  name: string;
}

export class ConfigMapReplayObject implements ReplayObject {
  readonly where: string;
  readonly #ref: ConfigMapRef;
  readonly #core: CoreV1Api;
  readonly #timeoutMs: number;
  /** The object as last read or written: a write sends it back whole (PUT), labels and annotations kept. */
  #last: V1ConfigMap | undefined;

  constructor(config: KubeConfig, ref: ConfigMapRef, options: { requestTimeoutMs?: number } = {}) {
    this.#ref = ref;
    this.where = `configmap ${ref.namespace}/${ref.name}`;
    this.#core = config.makeApiClient(CoreV1Api);
    this.#timeoutMs = options.requestTimeoutMs ?? REPLAY_REQUEST_TIMEOUT_MS;
  }

  async read(): Promise<ReplayObjectState> {
    const object = await this.#call('get', (options) =>
      this.#core.readNamespacedConfigMap(this.#ref, options),
    );
    return this.#keep(object);
  }

  async replace(
    data: Record<string, string>,
    resourceVersion: string,
  ): Promise<ReplayObjectState | 'conflict'> {
    try {
      return this.#keep(
        await this.#call('update', (options) =>
          this.#core.replaceNamespacedConfigMap(
            { ...this.#ref, body: this.#body(data, resourceVersion) },
            options,
          ),
        ),
      );
    } catch (error) {
      if (error instanceof ReplayRecordError && error.status === 409) return 'conflict';
      throw error;
    }
  }

  /** The whole object for a PUT: what a PUT leaves out is removed, so the labels and annotations the chart set go back as read. */
  #body(data: Record<string, string>, resourceVersion: string): V1ConfigMap {
    const last = this.#last;
    const metadata = new V1ObjectMeta();
    metadata.name = this.#ref.name;
    metadata.namespace = this.#ref.namespace;
    metadata.resourceVersion = resourceVersion;
    if (last?.metadata?.labels !== undefined) metadata.labels = last.metadata.labels;
    if (last?.metadata?.annotations !== undefined) metadata.annotations = last.metadata.annotations;
    if (last?.metadata?.ownerReferences !== undefined)
      metadata.ownerReferences = last.metadata.ownerReferences;
    if (last?.metadata?.finalizers !== undefined) metadata.finalizers = last.metadata.finalizers;
    const body = new V1ConfigMap();
    body.apiVersion = 'v1';
    body.kind = 'ConfigMap';
    body.metadata = metadata;
    body.data = data;
    if (last?.binaryData !== undefined) body.binaryData = last.binaryData;
    return body;
  }

  #keep(object: V1ConfigMap): ReplayObjectState {
    this.#last = object;
    const resourceVersion = object.metadata?.resourceVersion;
    if (resourceVersion === undefined)
      throw new ReplayRecordError(
        this.where,
        `the API server answered ${this.where} without a resourceVersion`,
      );
    return { data: object.data ?? {}, resourceVersion };
  }

  async #call(
    verb: 'get' | 'update',
    send: (options: ConfigurationOptions) => Promise<V1ConfigMap>,
  ): Promise<V1ConfigMap> {
    const deadline = AbortSignal.timeout(this.#timeoutMs);
    try {
      return await send(clientNodeRequest(deadline));
    } catch (error) {
      throw this.#failure(verb, error, deadline.aborted);
    }
  }

  #failure(verb: 'get' | 'update', error: unknown, timedOut: boolean): ReplayRecordError {
    const what = `${verb} ${this.where}`;
    if (error instanceof ApiException) {
      const status = error.code;
      const hint =
        status === 404
          ? ': the chart renders it (daemon replay store kubernetes); keyroll never creates it'
          : status === 403
            ? ': the Role must grant get and update on it'
            : '';
      return new ReplayRecordError(
        this.where,
        `${what}: the API server answered ${String(status)}${serverMessage(error.body)}${hint}`,
        { status, cause: error },
      );
    }
    if (timedOut)
      return new ReplayRecordError(
        this.where,
        `${what}: no answer within ${String(this.#timeoutMs / 1000)} s`,
        { cause: error },
      );
    const reason = transportReason(error);
    return new ReplayRecordError(this.where, `${what}: the API server could not be reached: ${reason}`, {
      cause: error,
    });
  }
}

function serverMessage(body: unknown): string {
  try {
    const parsed = JSON.parse(typeof body === 'string' ? body : '') as { message?: unknown };
    return typeof parsed.message === 'string' ? ` (${parsed.message.slice(0, 300)})` : '';
  } catch {
    return '';
  }
}
