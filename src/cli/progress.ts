// Progress for long runs: on a terminal, one line per finished key plus a live counter on
// stderr; elsewhere nothing (the audit lines on stdout are the record).
import type { KeyOutcome } from '../rotation/types.ts';

export interface ProgressReporter {
  keyDone(outcome: KeyOutcome): void;
  finish(): void;
}

export function createProgressReporter(total: number, stream: NodeJS.WriteStream = process.stderr): ProgressReporter {
  if (!stream.isTTY) return { keyDone: () => undefined, finish: () => undefined };
  let done = 0;
  const counts = new Map<string, number>();
  const counter = (): string =>
    `[${done}/${total}] ` + [...counts.entries()].map(([result, n]) => `${result} ${n}`).join(', ');
  return {
    keyDone: (outcome) => {
      done++;
      counts.set(outcome.result, (counts.get(outcome.result) ?? 0) + 1);
      const detail = outcome.result === 'failed' ? ` at ${outcome.step ?? '?'}: ${outcome.errorCode ?? ''}` : outcome.detail ? ` (${outcome.detail})` : '';
      stream.write(`\r\x1b[2K${outcome.keyId} ${outcome.result}${detail} in ${outcome.durationMs} ms\n${counter()}`);
    },
    finish: () => {
      stream.write('\r\x1b[2K');
    },
  };
}
