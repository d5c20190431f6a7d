// Progress for long runs whose stdout is piped (`keyroll run | jq`, `> run.log`) while a person
// watches stderr: one line per finished key plus a live counter there. When stdout is itself the
// terminal, the progress view (live-view.ts) shows this and more; in a pod, nothing (the
// audit lines on stdout are the record). output-mode.ts decides which.
import type { KeyOutcome } from '../../rotation/public/types.ts';
import { terminalLine } from '../../audit/public/printable.ts';

export interface ProgressReporter {
  keyDone(outcome: KeyOutcome): void;
  finish(): void;
}

export function createProgressReporter(
  total: number,
  stream: NodeJS.WriteStream = process.stderr,
): ProgressReporter {
  if (!stream.isTTY) return { keyDone: () => undefined, finish: () => undefined };
  let done = 0;
  const counts = new Map<string, number>();
  const counter = (): string =>
    `[${done}/${total}] ` + [...counts.entries()].map(([result, n]) => `${result} ${n}`).join(', ');
  return {
    keyDone: (outcome) => {
      done++;
      counts.set(outcome.result, (counts.get(outcome.result) ?? 0) + 1);
      const detail =
        outcome.result === 'failed'
          ? ` at ${outcome.step}: ${outcome.errorCode}`
          : outcome.detail
            ? ` (${outcome.detail})`
            : '';
      // The erase is keyroll's own; the key's line is text, whatever an error message held.
      stream.write(
        `\r\x1b[2K${terminalLine`${outcome.keyId} ${outcome.result}${detail} in ${outcome.durationMs} ms`}\n${counter()}`,
      );
    },
    finish: () => {
      stream.write('\r\x1b[2K');
    },
  };
}
