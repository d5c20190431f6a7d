// Serves rotate-now requests for the reporter (rotate-now.ts says what the annotation means): the
// leader sees a RotatedKey carrying keyroll.io/rotate-now, asks the daemon's port to rotate the
// key, and settles the request: status.rotateNow {value, requestedBy, settledAt, outcome} written
// with the key's new status in one patch, an Event, then the annotation removed (only if it still
// holds that value). A value is served once: not while it is in flight, not again in this process
// (the reflector's copy may lag our own writes), not again by any process once status.rotateNow
// records it settled (a resync, a new leader). A request for a refused key, or with a reason keyroll
// does not know, is settled without a rotation. A run that ended without deciding (shutdown, lost
// leadership) leaves the request for the next leader.
import type { AuditLog } from '../../audit/public/events.ts';
import { catalogueCode, errorMessage } from '../../errors.ts';
import type { KeyOutcome } from '../../rotation/public/types.ts';
import type { RotateNowStatus } from '../kinds/rotated-key-status.ts';
import { conditionTime } from '../status/conditions.ts';
import type { WatchedObject, WatchedResource } from '../watch/resource.ts';
import type { AnnotationRequests } from './annotation-client.ts';
import type { StatusRefusal } from './key-status.ts';
import type { EventFacts } from './outcome-events.ts';
import { objectRef } from './object-key.ts';
import {
  alreadySettled,
  parseRotateNow,
  requestedBy,
  ROTATE_NOW_ANNOTATION,
  ROTATE_NOW_REASONS,
  rotateNowValue,
  settledOutcome,
  type RotateNowPort,
} from './rotate-now.ts';

export interface RotateNowServerOptions {
  port: RotateNowPort;
  annotations: AnnotationRequests;
  resource: WatchedResource;
  objects: { get(key: string): WatchedObject | undefined };
  audit: AuditLog;
  now: () => Date;
  keyOf: (object: string) => string | undefined;
  refusalOf: (object: string) => StatusRefusal | undefined;
  /** Writes the settled request, with `outcome` applied to the key's facts (once, however it came). */
  settle: (object: string, settled: RotateNowStatus, outcome: KeyOutcome | undefined) => void;
  event: (object: string, facts: EventFacts) => void;
  track: <T>(work: Promise<T>) => Promise<T>;
}

export class RotateNowServer {
  readonly #options: RotateNowServerOptions;
  readonly #inFlight = new Set<string>();
  /** Object → the value this process served last. */
  readonly #served = new Map<string, string>();
  /**
   * Object → the value whose annotation this process removed (or is removing), until the watch shows
   * the object without it: a copy still carrying it (the settle's own status write, seen before the
   * removal) is older than the removal, and removing again would only cost a refused PATCH.
   */
  readonly #removed = new Map<string, string>();

  constructor(options: RotateNowServerOptions) {
    this.#options = options;
  }

  inFlight(object: string): boolean {
    return this.#inFlight.has(object);
  }

  scanAll(signal: AbortSignal | undefined, objects: readonly string[]): void {
    for (const object of objects) this.scan(signal, object);
  }

  /** Looks at one object; starts serving its request when there is one to serve. `signal`: the leader's term. */
  scan(signal: AbortSignal | undefined, object: string): void {
    if (signal === undefined || signal.aborted || this.#inFlight.has(object)) return;
    const current = this.#options.objects.get(object);
    const value = rotateNowValue(current);
    if (current === undefined || value === undefined) {
      this.#removed.delete(object);
      return;
    }
    if (this.#removed.get(object) === value) return;
    if (this.#served.get(object) === value || alreadySettled(current, value)) {
      // Served already: only the annotation is left to remove (a crash, a lost removal).
      void this.#options.track(this.removeAnnotation(object, value, signal));
      return;
    }
    const refusal = this.#options.refusalOf(object);
    const keyId = this.#options.keyOf(object);
    // Neither rotated nor refused yet: the daemon's next generation scans it again.
    if (refusal === undefined && keyId === undefined) return;
    this.#inFlight.add(object);
    void this.#options.track(this.#serve(object, current, value, keyId, refusal, signal));
  }

  async #serve(
    object: string,
    current: WatchedObject,
    value: string,
    keyId: string | undefined,
    refusal: StatusRefusal | undefined,
    signal: AbortSignal,
  ): Promise<void> {
    const by = requestedBy(current);
    const request = parseRotateNow(value);
    try {
      let outcome: KeyOutcome | undefined;
      let settled: string | undefined;
      let detail: string;
      if (request === undefined) {
        settled = 'InvalidRequest';
        detail = `${ROTATE_NOW_ANNOTATION} must be "<reason>[: text]" with reason ${ROTATE_NOW_REASONS.join(', ')}`;
      } else if (refusal !== undefined || keyId === undefined) {
        settled = 'Refused';
        detail = `not rotated: the key is refused (${refusal?.reason ?? 'unknown'})`;
      } else {
        try {
          outcome = await this.#options.port(
            keyId,
            { ...request, object, ...(by === undefined ? {} : { requestedBy: by }) },
            signal,
          );
          settled = settledOutcome(outcome);
          detail = describe(outcome);
        } catch (error) {
          if (signal.aborted) return;
          // Never retried by itself: a request that failed to start is settled and says so.
          settled = 'RotationFailed';
          detail = `the rotation could not run (${catalogueCode(error)})`;
          this.#options.audit.emit('crd.status.failed', {
            object,
            what: 'rotate-now',
            errorCode: catalogueCode(error),
            error: errorMessage(error),
          });
        }
      }
      if (settled === undefined || signal.aborted) return;
      this.#served.set(object, value);
      const status: RotateNowStatus = {
        value,
        ...(by === undefined ? {} : { requestedBy: by }),
        settledAt: conditionTime(this.#options.now()),
        outcome: settled,
      };
      this.#options.audit.emit('crd.rotate_now.settled', {
        object,
        ...(keyId === undefined ? {} : { keyId }),
        reason: request?.reason ?? 'invalid',
        ...(by === undefined ? {} : { requestedBy: by }),
        outcome: settled,
        ...(outcome?.rotationId === undefined ? {} : { rotationId: outcome.rotationId }),
      });
      this.#options.event(object, {
        type: settled === 'Rotated' || settled === 'Recovered' ? 'Normal' : 'Warning',
        reason: 'RotateNowSettled',
        message: `rotate-now (${request?.reason ?? 'invalid'}) asked by ${by ?? 'an unknown field manager'}: ${settled}; ${detail}`,
      });
      // Still in flight: the reporter's onKeyOutcome leaves the write to this settle.
      this.#options.settle(object, status, outcome);
    } finally {
      this.#inFlight.delete(object);
    }
  }

  /** Removes the annotation if it still holds `value`; a failure is audited (the next scan retries). */
  async removeAnnotation(object: string, value: string, signal: AbortSignal): Promise<void> {
    if (this.#removed.get(object) === value) return;
    this.#removed.set(object, value);
    try {
      const removal = await this.#options.annotations.removeAnnotation(
        objectRef(this.#options.resource, object),
        ROTATE_NOW_ANNOTATION,
        value,
        signal,
      );
      // Another value now (or none): nothing of ours is left to wait for.
      if (removal !== 'removed' && this.#removed.get(object) === value) this.#removed.delete(object);
    } catch (error) {
      // Not removed: the next scan tries again.
      if (this.#removed.get(object) === value) this.#removed.delete(object);
      if (signal.aborted) return;
      this.#options.audit.emit('crd.status.failed', {
        object,
        what: 'rotate-now-annotation',
        errorCode: catalogueCode(error),
        error: errorMessage(error),
      });
    }
  }
}

function describe(outcome: KeyOutcome): string {
  if (outcome.result === 'failed') return `failed at step ${outcome.step} (${outcome.errorCode})`;
  const rotation = outcome.rotationId === undefined ? '' : `rotation ${outcome.rotationId}`;
  if (outcome.result === 'skipped')
    return `skipped (${outcome.detail})${rotation === '' ? '' : `; ${rotation}`}`;
  return rotation === '' ? outcome.result : `${outcome.result}; ${rotation}`;
}
