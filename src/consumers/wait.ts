// Waiting for one object to reach a state (an ExternalSecret synced, a rollout complete): read it,
// then watch it from that version until the judge decides, reading it again whenever a watch ends,
// until the deadline. A Role without `watch` is not fatal: the object is then read every couple of
// seconds instead.
import { ConsumerError } from './errors.ts';
import type { KubeClient, KubeObject, KubeObjectRef } from './kubernetes/client.ts';

/** What the judge says of one state of the object. */
export type Verdict<T> = { done: T } | { waiting: string } | { failed: ConsumerError };

export interface WaitOptions {
  timeoutMs: number;
  /** Shutdown. */
  signal?: AbortSignal;
  /** What is awaited, for the timeout's message: "the rollout of deployment shop/checkout". */
  what: string;
  /** Between reads when the object cannot be watched. */
  pollMs?: number;
}

export async function waitForObject<T>(
  client: KubeClient,
  ref: KubeObjectRef,
  judge: (object: KubeObject) => Verdict<T>,
  options: WaitOptions,
): Promise<{ value: T; object: KubeObject }> {
  const deadline = AbortSignal.timeout(options.timeoutMs);
  const stop = options.signal === undefined ? deadline : AbortSignal.any([deadline, options.signal]);
  let last = 'no answer yet';
  // Set from the watch's failure handler: an object, so the loop reads what the handler wrote.
  const watching = { allowed: true };
  const timedOut = (): ConsumerError =>
    new ConsumerError(
      'KR_CONSUMER_TIMEOUT',
      `${options.what} did not finish within ${formatMs(options.timeoutMs)} (last seen: ${last})`,
    );
  for (;;) {
    if (isAborted(stop)) throw timedOut();
    let object: KubeObject;
    try {
      object = await client.get(ref, stop);
    } catch (error) {
      if (isAborted(stop)) throw timedOut();
      if (error instanceof ConsumerError && error.retryable) {
        // An API server restarting or briefly away: keep trying until the deadline.
        last = error.message;
        await pause(options.pollMs ?? 2_000, stop);
        continue;
      }
      throw error;
    }
    const first = judge(object);
    if ('done' in first) return { value: first.done, object };
    if ('failed' in first) throw first.failed;
    last = first.waiting;
    if (!watching.allowed) {
      await pause(options.pollMs ?? 2_000, stop);
      continue;
    }
    const decided = await watchUntilDecided(client, ref, object, judge, stop, (waiting) => {
      last = waiting;
    }).catch((error: unknown) => {
      if (error instanceof ConsumerError && error.code === 'KR_CONSUMER_FORBIDDEN') {
        watching.allowed = false;
        return undefined;
      }
      if (isAborted(stop)) return undefined;
      throw error;
    });
    if (decided === undefined) continue;
    if ('failed' in decided.verdict) throw decided.verdict.failed;
    return { value: decided.verdict.done, object: decided.object };
  }
}

async function watchUntilDecided<T>(
  client: KubeClient,
  ref: KubeObjectRef,
  from: KubeObject,
  judge: (object: KubeObject) => Verdict<T>,
  stop: AbortSignal,
  onWaiting: (waiting: string) => void,
): Promise<{ verdict: { done: T } | { failed: ConsumerError }; object: KubeObject } | undefined> {
  const resourceVersion = from.metadata?.resourceVersion;
  if (resourceVersion === undefined) return undefined;
  const watchStop = new AbortController();
  let decided: { verdict: { done: T } | { failed: ConsumerError }; object: KubeObject } | undefined;
  await client.watch(
    ref,
    resourceVersion,
    (object) => {
      if (decided !== undefined) return;
      const verdict = judge(object);
      if ('waiting' in verdict) {
        onWaiting(verdict.waiting);
        return;
      }
      decided = { verdict, object };
      watchStop.abort();
    },
    AbortSignal.any([stop, watchStop.signal]),
  );
  return decided;
}

// A function, not a property test: TypeScript keeps a property's narrowing across awaits in a loop.
function isAborted(signal: AbortSignal): boolean {
  return signal.aborted;
}

/** Sleeps `ms`, or less when `signal` aborts (never throws). */
export function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted === true) {
      resolve();
      return;
    }
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}

export function formatMs(ms: number): string {
  return ms % 60_000 === 0 ? `${String(ms / 60_000)} min` : `${String(Math.round(ms / 100) / 10)} s`;
}
