// Starting and stopping tracing for a process (the CLI's `run`, `rotate` and `daemon`). With the
// OTEL_* variables silent, nothing happens and nothing is loaded. Asked for, the OpenTelemetry SDK
// is loaded (a dynamic import of otel/sdk.ts) and installed behind keyroll's tracing API
// (spans.ts) and the audit log's trace ids. An install without the optional OpenTelemetry packages
// (`npm ci --omit=optional`, or a bundle built --without-tracing) says so and runs untraced:
// tracing never stops a rotation.
import { setTraceIdsSource } from '../audit/public/trace-ids.ts';
import { pinSecretValue, sanitizeText } from '../audit/public/sanitize.ts';
import { errorMessage } from '../errors.ts';
import { tracingSettings } from './settings.ts';
import { installTracing } from './spans.ts';

export interface RunningTracing {
  /** Hands every ended span to the exporter and waits for it, at most the OTLP timeout (10 s by default). */
  flush(): Promise<void>;
  /** Flushes, then stops tracing. */
  shutdown(): Promise<void>;
}

export interface StartTracingOptions {
  /** One line for a person (the CLI: stderr). */
  warn: (line: string) => void;
}

/**
 * Starts tracing when the environment asks for it; undefined when it is off or cannot start.
 * `env` is the process's environment: the OTLP exporter reads its endpoint, headers, timeout and
 * compression from process.env itself.
 */
export async function startTracing(
  env: NodeJS.ProcessEnv,
  options: StartTracingOptions,
): Promise<RunningTracing | undefined> {
  const settings = tracingSettings(env);
  // The collector's credentials are secrets like any other: no log line, error or span carries them.
  if (settings.on) for (const credential of settings.credentials) pinSecretValue(credential);
  for (const warning of settings.warnings) options.warn(sanitizeText(`tracing: ${warning}`));
  if (!settings.on) return undefined;
  let sdk: typeof import('./otel/sdk.ts');
  try {
    sdk = await import('./otel/sdk.ts');
  } catch (error) {
    options.warn(
      sanitizeText(
        `tracing: the OpenTelemetry SDK cannot be loaded (${errorMessage(error).split('\n')[0] ?? ''}); running without traces`,
      ),
    );
    return undefined;
  }
  const running = await sdk.startOtel(settings, { warn: options.warn });
  installTracing(running.tracing);
  setTraceIdsSource(() => running.tracing.activeIds());
  let stopped: Promise<void> | undefined;
  return {
    flush: () => running.flush(),
    shutdown: () =>
      (stopped ??= (async () => {
        // No span starts from here on; the ones already started still end and are exported.
        installTracing(undefined);
        setTraceIdsSource(undefined);
        await running.shutdown();
      })()),
  };
}
