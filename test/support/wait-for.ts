// Waiting for a condition that something else makes true (a process, a server, a background
// task): the one polling loop tests use instead of writing their own. The deadline only turns a
// stuck case into a failure that names what it waited for; no assertion depends on how fast the
// condition comes true (tests never assert wall-clock times).
import { setTimeout as sleep } from 'node:timers/promises';

export interface WaitForOptions {
  /** Gives up after this long (default 30 s). */
  timeoutMs?: number;
  /** Between two looks (default 10 ms). */
  intervalMs?: number;
}

/**
 * Resolves once `condition` answers true. A condition that throws ends the wait with its error
 * (say so when the thing waited for can no longer happen, e.g. the process exited).
 */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  what: string,
  options: WaitForOptions = {},
): Promise<void> {
  const { timeoutMs = 30_000, intervalMs = 10 } = options;
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`gave up after ${String(timeoutMs)} ms waiting for: ${what}`);
    await sleep(intervalMs);
  }
}
