// Where the leader election keeps its record: one coordination.k8s.io/v1 Lease (kube-lease-store.ts).
// The interface is the three calls client-go's resourcelock makes (get, create, update), each
// write guarded by the resourceVersion it read (optimistic concurrency: two candidates that read
// the same version cannot both write), so the elector can be tested against any store.

/** The Lease's spec as the elector reads and writes it (client-go's LeaderElectionRecord). */
export interface LeaseRecord {
  /** The leader's identity (its pod name); empty or absent: nobody holds it (released). */
  holderIdentity?: string;
  leaseDurationSeconds?: number;
  acquireTime?: Date;
  renewTime?: Date;
  leaseTransitions?: number;
}

export interface StoredLease {
  record: LeaseRecord;
  /** Changes on every write: what an update must name to land. */
  resourceVersion: string;
}

export interface LeaseStore {
  /** namespace/name, for the audit trail. */
  readonly describe: string;
  /** The Lease, or undefined when it does not exist. Throws LeaderError. */
  get(signal: AbortSignal): Promise<StoredLease | undefined>;
  /** Creates the Lease. Throws LeaderError KR_LEADER_CONFLICT when it exists already. */
  create(record: LeaseRecord, signal: AbortSignal): Promise<StoredLease>;
  /** Replaces the Lease's spec, only if it is still at `resourceVersion` (else KR_LEADER_CONFLICT). */
  update(record: LeaseRecord, resourceVersion: string, signal: AbortSignal): Promise<StoredLease>;
}
