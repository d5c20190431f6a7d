// Which replica of the daemon runs the work that must run once (schedules, sweeps, drift probes,
// owed consumer restarts, the leak reconcile): the holder of a Kubernetes Lease (src/leader/),
// or, without one (outside Kubernetes, a single daemon), always this daemon. Every replica still
// answers the webhooks and the signed trigger: those go through the backend key lock, which
// stays the fence (invariant 5); the Lease only keeps two replicas from doing the same work.
// Audits each change of leadership and keeps the keyroll_leader gauge.
import type { AuditLog } from '../audit/public/events.ts';
import { errorCode, errorMessage } from '../errors.ts';
import { ELECTION_DEFAULTS, LeaderElector, type ElectionTimings } from '../leader/public/elector.ts';
import type { LeaseStore } from '../leader/public/lease-store.ts';
import type { KeyrollMetrics } from '../metrics/public/metrics.ts';

export interface LeaderElectionOptions {
  store: LeaseStore;
  /** The pod name (downward API) or HOSTNAME. */
  identity: string;
  timings?: Partial<ElectionTimings>;
  /** Monotonic clock of the elector (tests); default performance.now. */
  clock?: () => number;
}

export class Leadership {
  readonly #elector: LeaderElector | undefined;
  /** The code of the failure already audited in the current streak (one event per streak, not per retry). */
  #failing: string | undefined;

  constructor(
    options: LeaderElectionOptions | undefined,
    audit: AuditLog,
    metrics: KeyrollMetrics,
    onElected: () => void,
    /** This replica stopped leading (lost, taken over, or released at shutdown). */
    onStopped: () => void = () => undefined,
  ) {
    metrics.setLeader(options === undefined);
    if (options === undefined) return;
    const lease = options.store.describe;
    const { identity } = options;
    this.#elector = new LeaderElector({
      ...ELECTION_DEFAULTS,
      ...options.timings,
      store: options.store,
      identity,
      ...(options.clock ? { clock: options.clock } : {}),
      events: {
        startedLeading: (term) => {
          this.#failing = undefined;
          metrics.setLeader(true);
          audit.emit('leader.elected', { identity, lease, transitions: term.transitions });
          onElected();
        },
        stoppedLeading: (_term, why, lastError) => {
          metrics.setLeader(false);
          onStopped();
          audit.emit('leader.lost', {
            identity,
            lease,
            why,
            ...(lastError === undefined
              ? {}
              : { errorCode: errorCode(lastError), error: errorMessage(lastError) }),
            next:
              why === 'released'
                ? 'shutting down; another replica takes the Lease on its next retry'
                : 'no new schedules, sweeps or reconciles start here; rotations already rolled finish their store; this replica keeps trying to lead',
          });
        },
        failed: (error, leading) => {
          const code = errorCode(error);
          if (!leading && this.#failing === code) return;
          this.#failing = code;
          audit.emit('leader.failed', {
            identity,
            lease,
            leading,
            errorCode: code,
            error: errorMessage(error),
          });
        },
      },
    });
  }

  /** Whether this daemon may start the work that must run once, now. */
  leads(): boolean {
    return this.#elector?.isLeader() ?? true;
  }

  /** Aborted the moment this replica stops leading (undefined without an election): what a leader's runs stop starting keys on. */
  termSignal(): AbortSignal | undefined {
    return this.#elector?.termSignal();
  }

  /** Whether a Lease decides (false: a single daemon outside Kubernetes). */
  get elected(): boolean {
    return this.#elector !== undefined;
  }

  start(): void {
    this.#elector?.start();
  }

  /** Stops leading and hands the Lease over (holderIdentity cleared). Never rejects. */
  async release(): Promise<void> {
    await this.#elector?.stop();
  }
}
