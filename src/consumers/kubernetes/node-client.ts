// KubeClient with @kubernetes/client-node: the in-cluster service account when keyroll runs in a
// pod, else a kubeconfig (the policy's, $KUBECONFIG, ~/.kube/config). Every request has a
// deadline, so an API server that accepts the connection and never answers cannot hold a delivery.
import {
  ApiException,
  ApisApi,
  AuthorizationV1Api,
  CustomObjectsApi,
  KubeConfig,
  PatchStrategy,
  Watch,
  type ConfigurationOptions,
  V1ResourceAttributes,
  V1SelfSubjectAccessReview,
  V1SelfSubjectAccessReviewSpec,
} from '@kubernetes/client-node';
import { ConsumerError, codeOfStatus } from '../errors.ts';
import { transportReason } from '../../errors.ts';
import {
  objectPath,
  type AccessAnswer,
  type KubeClient,
  type KubeObject,
  type KubeObjectRef,
  type KubeVerb,
  type PatchType,
} from './client.ts';
import { clientNodeRequest } from '../../http/public/client-node-request.ts';

export interface KubeConnection {
  /** A kubeconfig file; absent: in-cluster when in a pod, else $KUBECONFIG or ~/.kube/config. */
  kubeconfig?: string;
  context?: string;
}

/** Per request: the API server answers a get or a patch in milliseconds; this bounds a hung one. */
export const REQUEST_TIMEOUT_MS = 10_000;
/** A watch is asked to end after this long and then opened again (below client-node's 30 s idle limit). */
const WATCH_SECONDS = 25;

/**
 * The client configuration: a named kubeconfig file, else the pod's service account (its token is
 * re-read as the kubelet rotates it), else the default kubeconfig. Throws ConsumerError
 * KR_CONSUMER_NO_CLIENT when none can be loaded.
 */
export function loadKubeConfig(connection: KubeConnection, env: NodeJS.ProcessEnv = process.env): KubeConfig {
  const config = new KubeConfig();
  try {
    if (connection.kubeconfig !== undefined) config.loadFromFile(connection.kubeconfig);
    else if (env.KUBERNETES_SERVICE_HOST !== undefined && env.KUBERNETES_SERVICE_HOST !== '')
      config.loadFromCluster();
    else config.loadFromDefault();
    if (connection.context !== undefined) config.setCurrentContext(connection.context);
  } catch (error) {
    throw new ConsumerError(
      'KR_CONSUMER_NO_CLIENT',
      `no Kubernetes client configuration could be loaded: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  }
  if (config.getCurrentCluster() === null) {
    throw new ConsumerError(
      'KR_CONSUMER_NO_CLIENT',
      `no Kubernetes cluster is configured (${connection.kubeconfig ?? 'in-cluster account or the default kubeconfig'}${connection.context === undefined ? '' : `, context ${connection.context}`})`,
    );
  }
  return config;
}

export class NodeKubeClient implements KubeClient {
  readonly #config: KubeConfig;
  readonly #objects: CustomObjectsApi;
  readonly #apis: ApisApi;
  readonly #authorization: AuthorizationV1Api;
  readonly #requestTimeoutMs: number;

  constructor(config: KubeConfig, options: { requestTimeoutMs?: number } = {}) {
    this.#config = config;
    this.#objects = config.makeApiClient(CustomObjectsApi);
    this.#apis = config.makeApiClient(ApisApi);
    this.#authorization = config.makeApiClient(AuthorizationV1Api);
    this.#requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  }

  async get(ref: KubeObjectRef, signal?: AbortSignal): Promise<KubeObject> {
    return this.#call(`get ${objectPath(ref)}`, signal, (options) =>
      this.#objects.getNamespacedCustomObject(coordinates(ref), options),
    );
  }

  async patch(ref: KubeObjectRef, patch: object, type: PatchType, signal?: AbortSignal): Promise<KubeObject> {
    const contentType = type === 'merge' ? PatchStrategy.MergePatch : PatchStrategy.StrategicMergePatch;
    return this.#call(
      `patch ${objectPath(ref)}`,
      signal,
      (options) => this.#objects.patchNamespacedCustomObject({ ...coordinates(ref), body: patch }, options),
      contentType,
    );
  }

  async watch(
    ref: KubeObjectRef,
    resourceVersion: string,
    onChange: (object: KubeObject) => void,
    signal: AbortSignal,
  ): Promise<void> {
    if (signal.aborted) return;
    const path = `/apis/${ref.group}/${ref.version}/namespaces/${ref.namespace}/${ref.plural}`;
    await new Promise<void>((resolve, reject) => {
      let controller: AbortController | undefined;
      let ended = false;
      const stop = (): void => {
        controller?.abort();
      };
      signal.addEventListener('abort', stop, { once: true });
      const end = (error: unknown): void => {
        if (ended) return;
        ended = true;
        signal.removeEventListener('abort', stop);
        // A watch that was running and ended (closed by the server, idle, aborted) is a normal end:
        // the caller reads the object again and decides.
        if (error === null || error === undefined || signal.aborted || controller !== undefined) resolve();
        else reject(asConsumerError(error, `watch ${objectPath(ref)}`));
      };
      new Watch(this.#config)
        .watch(
          path,
          {
            fieldSelector: `metadata.name=${ref.name}`,
            resourceVersion,
            allowWatchBookmarks: false,
            timeoutSeconds: WATCH_SECONDS,
          },
          (phase: string, object: unknown) => {
            if ((phase === 'ADDED' || phase === 'MODIFIED') && typeof object === 'object' && object !== null)
              onChange(object);
          },
          end,
        )
        .then(
          (started) => {
            controller = started;
            if (signal.aborted) started.abort();
          },
          (error: unknown) => {
            end(error);
          },
        );
    });
  }

  async servedVersions(group: string, signal?: AbortSignal): Promise<string[]> {
    // GET /apis: every group with the versions it serves (the discovery document kubectl reads).
    const list = await this.#call(`discovery of ${group} (GET /apis)`, signal, (options) =>
      this.#apis.getAPIVersions(options),
    );
    const groups =
      (
        list as {
          groups?: {
            name?: string;
            versions?: { version?: string }[];
            preferredVersion?: { version?: string };
          }[];
        }
      ).groups ?? [];
    const found = groups.find((candidate) => candidate.name === group);
    if (found === undefined) return [];
    const versions = (found.versions ?? [])
      .map((entry) => entry.version)
      .filter((version): version is string => typeof version === 'string');
    const preferred = found.preferredVersion?.version;
    return preferred !== undefined && versions.includes(preferred)
      ? [preferred, ...versions.filter((version) => version !== preferred)]
      : versions;
  }

  async mayI(verb: KubeVerb, ref: KubeObjectRef, signal?: AbortSignal): Promise<AccessAnswer> {
    const body = new V1SelfSubjectAccessReview();
    body.apiVersion = 'authorization.k8s.io/v1';
    body.kind = 'SelfSubjectAccessReview';
    body.spec = new V1SelfSubjectAccessReviewSpec();
    body.spec.resourceAttributes = Object.assign(new V1ResourceAttributes(), {
      verb,
      group: ref.group,
      version: ref.version,
      resource: ref.plural,
      namespace: ref.namespace,
      name: ref.name,
    });
    const review = await this.#call(`access review of ${verb} ${objectPath(ref)}`, signal, (options) =>
      this.#authorization.createSelfSubjectAccessReview({ body }, options),
    );
    const status = (review as { status?: { allowed?: unknown; reason?: unknown } }).status;
    return {
      allowed: status?.allowed === true,
      ...(typeof status?.reason === 'string' && status.reason !== '' ? { reason: status.reason } : {}),
    };
  }

  async #call(
    where: string,
    signal: AbortSignal | undefined,
    send: (options: ConfigurationOptions) => Promise<unknown>,
    contentType?: string,
  ): Promise<KubeObject> {
    const deadline = AbortSignal.timeout(this.#requestTimeoutMs);
    const combined = signal === undefined ? deadline : AbortSignal.any([signal, deadline]);
    try {
      const answer = await send(clientNodeRequest(combined, contentType));
      return typeof answer === 'object' && answer !== null ? answer : {};
    } catch (error) {
      throw asConsumerError(error, where, deadline.aborted);
    }
  }
}

function coordinates(ref: KubeObjectRef): {
  group: string;
  version: string;
  namespace: string;
  plural: string;
  name: string;
} {
  return {
    group: ref.group,
    version: ref.version,
    namespace: ref.namespace,
    plural: ref.plural,
    name: ref.name,
  };
}

/** Every failure as a ConsumerError with a stable code; the API server's own message kept (it names no secret). */
function asConsumerError(error: unknown, where: string, timedOut = false): ConsumerError {
  if (error instanceof ConsumerError) return error;
  if (error instanceof ApiException) {
    const status = error.code;
    return new ConsumerError(
      codeOfStatus(status),
      `${where}: the API server answered ${String(status)}${serverMessage(error.body)}`,
      { status, cause: error },
    );
  }
  const status = (error as { statusCode?: unknown }).statusCode;
  if (typeof status === 'number')
    return new ConsumerError(codeOfStatus(status), `${where}: the API server answered ${String(status)}`, {
      status,
      cause: error,
    });
  if (
    timedOut ||
    (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError'))
  ) {
    return new ConsumerError(
      'KR_CONSUMER_TIMEOUT',
      `${where}: no answer within ${String(REQUEST_TIMEOUT_MS / 1000)} s`,
      { cause: error },
    );
  }
  const cause = error instanceof Error ? `: ${transportReason(error)}` : '';
  return new ConsumerError(
    'KR_CONSUMER_UNREACHABLE',
    `${where}: the API server could not be reached${cause}`,
    { cause: error },
  );
}

function serverMessage(body: unknown): string {
  const text = typeof body === 'string' ? body : '';
  try {
    const parsed = JSON.parse(text) as { message?: unknown };
    return typeof parsed.message === 'string' ? ` (${parsed.message.slice(0, 300)})` : '';
  } catch {
    return '';
  }
}
