// Removes a settled rotate-now annotation from a RotatedKey, and only that value: a JSON patch
// (RFC 6902) that tests the annotation still holds the value keyroll served before removing it, so
// a new request written meanwhile (another value) is never wiped out unanswered. The API server
// refuses a failed test with 422; that is "changed", not an error. This is the only write keyroll
// makes to a RotatedKey itself (not its /status): its RBAC needs `patch` on rotatedkeys for it
// (docs/crds.md, "Rotate now"). Sent over the same KubeConfig as the reflector's requests.
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { fetch } from 'undici';
import { transportReason } from '../../errors.ts';
import { answerError, CrdError } from '../watch/errors.ts';
import { FIELD_MANAGER } from '../watch/kube-client.ts';
import { objectPath, type ObjectRef } from '../watch/resource.ts';

export type AnnotationRemoval = 'removed' | 'changed' | 'gone';

export interface AnnotationRequests {
  /** Removes annotation `name` when it still holds `value`; throws CrdError for any other answer. */
  removeAnnotation(
    ref: ObjectRef,
    name: string,
    value: string,
    signal: AbortSignal,
  ): Promise<AnnotationRemoval>;
}

/** The JSON pointer of an annotation: `/` in a key is written `~1` (RFC 6901). */
export function annotationPointer(name: string): string {
  return `/metadata/annotations/${name.replaceAll('~', '~0').replaceAll('/', '~1')}`;
}

/** The patch that removes `name` only while it holds `value`. */
export function removalPatch(name: string, value: string): object[] {
  const path = annotationPointer(name);
  return [
    { op: 'test', path, value },
    { op: 'remove', path },
  ];
}

const REQUEST_TIMEOUT_MS = 30_000;

export class KubeAnnotationClient implements AnnotationRequests {
  readonly #config: KubeConfig;

  constructor(config: KubeConfig) {
    this.#config = config;
  }

  async removeAnnotation(
    ref: ObjectRef,
    name: string,
    value: string,
    signal: AbortSignal,
  ): Promise<AnnotationRemoval> {
    const path = objectPath(ref);
    const where = `patch ${path}`;
    const cluster = this.#config.getCurrentCluster();
    if (cluster === null)
      throw new CrdError('KR_CRD_UNREACHABLE', 'no Kubernetes cluster is configured', { where });
    const url = new URL(cluster.server + path);
    url.searchParams.set('fieldManager', FIELD_MANAGER);
    const context = new RequestContext(url.toString(), HttpMethod.PATCH);
    await this.#config.applySecurityAuthentication(context);
    let status: number;
    let message: string | undefined;
    try {
      const response = await fetch(url, {
        method: 'PATCH',
        headers: {
          ...context.getHeaders(),
          accept: 'application/json',
          'content-type': 'application/json-patch+json',
        },
        body: JSON.stringify(removalPatch(name, value)),
        dispatcher: context.getDispatcher(),
        signal: AbortSignal.any([signal, AbortSignal.timeout(REQUEST_TIMEOUT_MS)]),
      });
      status = response.status;
      const body = (await response.json().catch(() => undefined)) as { message?: unknown } | undefined;
      message = typeof body?.message === 'string' ? body.message : undefined;
    } catch (error) {
      throw new CrdError(
        'KR_CRD_UNREACHABLE',
        `${where}: the API server could not be reached: ${transportReason(error)}`,
        {
          where,
          cause: error,
        },
      );
    }
    if (status >= 200 && status <= 299) return 'removed';
    if (status === 404) return 'gone';
    // A failed `test` (the value changed, or the annotation is gone already).
    if (status === 422) return 'changed';
    throw answerError(where, status, message);
  }
}
