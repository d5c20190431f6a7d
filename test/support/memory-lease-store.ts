// A LeaseStore in memory with the API server's one rule that matters to the election: a write
// lands only on the resourceVersion it names (409 otherwise). Tests that are about the daemon's
// gating, not the Lease, use it; the elector itself is tested on the real kube-apiserver
// (test/integration/kube-leader-election.test.ts). `cut` makes every call fail as an unreachable
// API server would; `write` plays another replica.
import { LeaderError } from '../../src/leader/errors.ts';
import type { LeaseRecord, LeaseStore, StoredLease } from '../../src/leader/lease-store.ts';

export class MemoryLeaseStore implements LeaseStore {
  readonly describe = 'test/keyroll-leader';
  #lease: StoredLease | undefined;
  #version = 0;
  cut = false;

  /** What the Lease holds now. */
  get record(): LeaseRecord | undefined {
    return this.#lease?.record;
  }

  /** Another replica's write (no version check). */
  write(record: LeaseRecord): StoredLease {
    this.#lease = { record, resourceVersion: String(++this.#version) };
    return this.#lease;
  }

  get(): Promise<StoredLease | undefined> {
    return this.#answer(() => this.#lease);
  }

  create(record: LeaseRecord): Promise<StoredLease> {
    return this.#answer(() => {
      if (this.#lease) throw new LeaderError('KR_LEADER_CONFLICT', 'exists');
      return this.write(record);
    });
  }

  update(record: LeaseRecord, resourceVersion: string): Promise<StoredLease> {
    return this.#answer(() => {
      if (this.#lease?.resourceVersion !== resourceVersion)
        throw new LeaderError('KR_LEADER_CONFLICT', 'stale resourceVersion');
      return this.write(record);
    });
  }

  async #answer<T>(act: () => T): Promise<T> {
    await Promise.resolve();
    if (this.cut) throw new LeaderError('KR_LEADER_UNREACHABLE', 'cut off');
    return act();
  }
}
