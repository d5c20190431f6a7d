// `run` and `rotate` as one trace each (docs/tracing.md): when the OTEL_* variables switch tracing
// on, the whole command is one root span, `keyroll run` or `keyroll rotate`, the child of the
// TRACEPARENT its CI job or scheduler gave it when there is one. Every way out of the command
// (exit codes 0 to 4, or an error thrown) ends the span and flushes the spans before the process
// exits: a short-lived run leaves no span behind in a buffer. With tracing off this is a plain call.
import type { ErrorCode } from '../error-codes.ts';
import { inSpan } from '../tracing/public/spans.ts';
import { printableLines } from '../audit/public/printable.ts';
import { startTracing } from '../tracing/public/start.ts';

export async function tracedCommand(command: 'run' | 'rotate', run: () => Promise<number>): Promise<number> {
  const tracing = await startTracing(process.env, {
    warn: (line) => {
      process.stderr.write(`keyroll: ${printableLines(line)}\n`);
    },
  });
  if (tracing === undefined) return run();
  try {
    return await inSpan(
      `keyroll ${command}`,
      { 'keyroll.command': command },
      async (span) => {
        const exitCode = await run();
        span.setAttributes({ 'keyroll.exit_code': exitCode });
        if (exitCode !== 0) span.fail(exitSpanCode(exitCode));
        return exitCode;
      },
      'environment',
    );
  } finally {
    await tracing.shutdown();
  }
}

/** The code a failed command's span carries (docs/tracing.md): one per exit code of docs/exit-codes.md. */
function exitSpanCode(exitCode: number): ErrorCode {
  const codes: Record<number, ErrorCode | undefined> = {
    1: 'KR_EXIT_1',
    2: 'KR_EXIT_2',
    3: 'KR_EXIT_3',
    4: 'KR_EXIT_4',
  };
  return codes[exitCode] ?? 'KR_UNEXPECTED';
}
