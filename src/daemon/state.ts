// The daemon's state as one union, and every change of it in one place (issue 29 §2). Separate
// flags (ready, stopping, reloading, a shutdown result) could say "shutting down but ready" or
// "reloading after the shutdown began"; one phase with the fields that phase has cannot. Modelled
// on Temporal's worker state: a named phase, transitions that check the phase they leave, and a
// refused transition answers as the daemon always did (a reload during a shutdown is STOPPING and
// its new policy never starts; a readiness answer for a replaced policy is dropped).
import type { CheckedReadiness, Readiness } from '../scheduler/public/readiness.ts';

/** What /readyz says while the daemon serves: not checked yet, or the last check's answer. */
export type ServingReadiness = { state: 'starting' } | CheckedReadiness;

/** The policy in force: its generation and the secrets its endpoints use, swapped together. */
export interface InForce<G, S> {
  generation: G;
  secrets: S;
}

export type DaemonPhase<G, S, R> =
  /** Built, not yet listening: nothing scheduled, no readiness check made. */
  | ({ phase: 'starting' } & InForce<G, S>)
  /** Listening, scheduling and sweeping under `generation`. */
  | ({ phase: 'serving'; readiness: ServingReadiness } & InForce<G, S>)
  /** As serving; a new policy is loading beside the one in force. */
  | ({ phase: 'reloading'; readiness: ServingReadiness } & InForce<G, S>)
  /** Refuses new work; `result` settles when the in-flight rotations finished or the grace expired. */
  | ({ phase: 'shutting-down'; result: Promise<R> } & InForce<G, S>);

/**
 * Holds a daemon's phase and makes its transitions. Generic over what it holds so a test can
 * drive it with plain values; the Daemon uses Generation, EndpointSecrets and ShutdownResult.
 */
export class DaemonState<G, S, R> {
  #state: DaemonPhase<G, S, R>;

  constructor(first: InForce<G, S>) {
    this.#state = { phase: 'starting', ...first };
  }

  get current(): Readonly<DaemonPhase<G, S, R>> {
    return this.#state;
  }

  get generation(): G {
    return this.#state.generation;
  }

  get secrets(): S {
    return this.#state.secrets;
  }

  /** Whether new work (a trigger, a reload, a sweep's next step) may begin. */
  accepting(): boolean {
    return this.#state.phase !== 'shutting-down';
  }

  /** Still the generation in force, and no shutdown began: what a step found after an await may be acted on. */
  isCurrent(generation: G): boolean {
    return this.accepting() && generation === this.#state.generation;
  }

  readiness(): Readiness {
    switch (this.#state.phase) {
      case 'starting':
        return { state: 'starting' };
      case 'serving':
      case 'reloading':
        return this.#state.readiness;
      case 'shutting-down':
        return { state: 'shutting-down' };
    }
  }

  /** starting → serving: the port listens; readiness stays `starting` until the first check answers. */
  serve(): boolean {
    if (this.#state.phase !== 'starting') return false;
    this.#state = { ...this.#state, phase: 'serving', readiness: { state: 'starting' } };
    return true;
  }

  /** Records a readiness check of `generation`; dropped when that policy was replaced or a shutdown began. */
  checked(generation: G, readiness: CheckedReadiness): boolean {
    const state = this.#state;
    if (state.phase !== 'serving' && state.phase !== 'reloading') return false;
    if (state.generation !== generation) return false;
    this.#state = { ...state, readiness };
    return true;
  }

  /** serving → reloading; refused once a shutdown began (the reload answers STOPPING). */
  beginReload(): boolean {
    if (this.#state.phase !== 'serving') return false;
    this.#state = { ...this.#state, phase: 'reloading' };
    return true;
  }

  /**
   * reloading → serving, with `next` in force when given (the readiness of the previous policy
   * stands until the new one's check answers). Refused once a shutdown began: `next` never starts.
   */
  endReload(next?: InForce<G, S>): boolean {
    if (this.#state.phase !== 'reloading') return false;
    this.#state = { ...this.#state, ...next, phase: 'serving' };
    return true;
  }

  /** Any phase → shutting-down, once: a second call answers the first's result. */
  shutDown(begin: () => Promise<R>): Promise<R> {
    if (this.#state.phase === 'shutting-down') return this.#state.result;
    const { generation, secrets } = this.#state;
    // The phase changes before `begin` runs: whatever it starts already sees a daemon that stops.
    let settle: (result: Promise<R>) => void = () => undefined;
    const result = new Promise<R>((resolve) => {
      settle = resolve;
    });
    this.#state = { phase: 'shutting-down', generation, secrets, result };
    settle(begin());
    return result;
  }
}
