// LeaseStore on a real coordination.k8s.io/v1 Lease with @kubernetes/client-node. Every request
// has a deadline (the elector passes its own signal: a leader's request never outlives its renew
// deadline), and every failure becomes a LeaderError with a stable code. An update is a PUT of the
// object as last read, with its resourceVersion: the API server refuses it (409) when anyone wrote
// the Lease since, which is the whole of the election's concurrency control.
import {
  ApiException,
  CoordinationV1Api,
  V1Lease,
  V1LeaseSpec,
  V1MicroTime,
  V1ObjectMeta,
  type KubeConfig,
} from '@kubernetes/client-node';
import { LeaderError } from './errors.ts';
import type { LeaseRecord, LeaseStore, StoredLease } from './lease-store.ts';
import { clientNodeRequest } from '../http/public/client-node-request.ts';

export interface LeaseCoordinates {
  namespace: string;
  name: string;
}

export class KubeLeaseStore implements LeaseStore {
  readonly describe: string;
  readonly #api: CoordinationV1Api;
  readonly #lease: LeaseCoordinates;
  /** The object as last read or written: an update keeps its metadata (labels the chart set). */
  #last: V1Lease | undefined;

  constructor(config: KubeConfig, lease: LeaseCoordinates) {
    this.#api = config.makeApiClient(CoordinationV1Api);
    this.#lease = lease;
    this.describe = `${lease.namespace}/${lease.name}`;
  }

  async get(signal: AbortSignal): Promise<StoredLease | undefined> {
    try {
      return this.#remember(
        await this.#api.readNamespacedLease({ ...this.#lease }, clientNodeRequest(signal)),
      );
    } catch (error) {
      if (error instanceof ApiException && error.code === 404) return undefined;
      throw this.#asLeaderError(error, 'get', signal);
    }
  }

  async create(record: LeaseRecord, signal: AbortSignal): Promise<StoredLease> {
    const body = leaseOf(
      Object.assign(new V1ObjectMeta(), { name: this.#lease.name, namespace: this.#lease.namespace }),
      record,
    );
    try {
      return this.#remember(
        await this.#api.createNamespacedLease(
          { namespace: this.#lease.namespace, body },
          clientNodeRequest(signal),
        ),
      );
    } catch (error) {
      throw this.#asLeaderError(error, 'create', signal);
    }
  }

  async update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<StoredLease> {
    const base = this.#last?.metadata?.resourceVersion === resourceVersion ? this.#last.metadata : undefined;
    const metadata = Object.assign(new V1ObjectMeta(), {
      name: this.#lease.name,
      namespace: this.#lease.namespace,
      resourceVersion,
    });
    if (base?.labels !== undefined) metadata.labels = base.labels;
    if (base?.annotations !== undefined) metadata.annotations = base.annotations;
    const body = leaseOf(metadata, record);
    try {
      return this.#remember(
        await this.#api.replaceNamespacedLease({ ...this.#lease, body }, clientNodeRequest(signal)),
      );
    } catch (error) {
      throw this.#asLeaderError(error, 'update', signal);
    }
  }

  #remember(lease: V1Lease): StoredLease {
    this.#last = lease;
    const spec = lease.spec ?? new V1LeaseSpec();
    return {
      resourceVersion: lease.metadata?.resourceVersion ?? '',
      record: {
        ...(spec.holderIdentity === undefined ? {} : { holderIdentity: spec.holderIdentity }),
        ...(spec.leaseDurationSeconds === undefined
          ? {}
          : { leaseDurationSeconds: spec.leaseDurationSeconds }),
        ...(spec.acquireTime === undefined ? {} : { acquireTime: new Date(spec.acquireTime) }),
        ...(spec.renewTime === undefined ? {} : { renewTime: new Date(spec.renewTime) }),
        ...(spec.leaseTransitions === undefined ? {} : { leaseTransitions: spec.leaseTransitions }),
      },
    };
  }

  #asLeaderError(error: unknown, verb: string, signal: AbortSignal): LeaderError {
    const where = `${verb} Lease ${this.describe}`;
    if (error instanceof ApiException) {
      const status = error.code;
      const code =
        status === 409
          ? 'KR_LEADER_CONFLICT'
          : status === 401 || status === 403
            ? 'KR_LEADER_FORBIDDEN'
            : 'KR_LEADER_API_ERROR';
      return new LeaderError(code, `${where}: the API server answered ${String(status)}`, {
        status,
        cause: error,
      });
    }
    const why = signal.aborted
      ? 'no answer before the deadline'
      : `the API server could not be reached${error instanceof Error ? `: ${error.message}` : ''}`;
    return new LeaderError('KR_LEADER_UNREACHABLE', `${where}: ${why}`, { cause: error });
  }
}

/** The object a create or an update sends: metadata, and the spec from the record. */
function leaseOf(metadata: V1ObjectMeta, record: LeaseRecord): V1Lease {
  const spec = new V1LeaseSpec();
  spec.holderIdentity = record.holderIdentity ?? '';
  if (record.leaseDurationSeconds !== undefined) spec.leaseDurationSeconds = record.leaseDurationSeconds;
  if (record.acquireTime !== undefined) spec.acquireTime = new V1MicroTime(record.acquireTime.getTime());
  if (record.renewTime !== undefined) spec.renewTime = new V1MicroTime(record.renewTime.getTime());
  if (record.leaseTransitions !== undefined) spec.leaseTransitions = record.leaseTransitions;
  return Object.assign(new V1Lease(), {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata,
    spec,
  });
}
