// Fault injection for tests: queue faults per operation; each incoming call of that operation
// takes the next one. Off by default in the sense that nothing fails until a test queues a
// fault (in-process, or over /_emulator/ when the server was started with faultInjection).

export const EMULATOR_OPERATIONS = ['roll', 'listProjects', 'updateProject', 'updateConsent'] as const;
export type EmulatorOperation = (typeof EMULATOR_OPERATIONS)[number];

export type EmulatorFault =
  /** Answer this status (and Retry-After when given) with the spec's envelope, without applying. */
  | { kind: 'status'; status: number; code?: string; retryAfter?: string }
  /** Wait, then answer normally. */
  | { kind: 'delay'; ms: number }
  /** Destroy the socket without answering; nothing is applied. */
  | { kind: 'drop' }
  /** Apply the operation (a roll: old secret dead), then lose the answer. */
  | { kind: 'failAfterApply'; then: 'status500' | 'drop' | 'hang' }
  /**
   * Answer this raw body. A roll is applied first and `{{key}}` in the body becomes the new
   * secret; other operations are not applied.
   */
  | { kind: 'malformed'; body: string; contentType?: string; status?: number };

export class FaultInjector {
  readonly #queues = new Map<EmulatorOperation, EmulatorFault[]>();

  /** Makes the next `count` calls of `operation` meet `fault` (after any faults already queued). */
  inject(operation: EmulatorOperation, fault: EmulatorFault, count = 1): void {
    const queue = this.#queues.get(operation) ?? [];
    for (let i = 0; i < count; i += 1) queue.push(fault);
    this.#queues.set(operation, queue);
  }

  /** Drops every queued fault. */
  clear(): void {
    this.#queues.clear();
  }

  /** Faults still queued for `operation`. */
  pending(operation: EmulatorOperation): number {
    return this.#queues.get(operation)?.length ?? 0;
  }

  /** Takes the fault for the call that just arrived, if any. */
  take(operation: EmulatorOperation): EmulatorFault | undefined {
    return this.#queues.get(operation)?.shift();
  }
}
