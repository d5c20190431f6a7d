// A faithful local implementation of the key-management API (docs/api.md) with
// fault injection, for the demo, the tests, the benchmarks and people trying keyroll without
// the real service. Every choice made where the spec is silent is listed in docs/emulator.md.
import type { AddressInfo } from 'node:net';
import { setTimeout as sleepFor } from 'node:timers/promises';
import Fastify, { type FastifyError, type FastifyInstance } from 'fastify';
import { CursorCodec } from './cursor.ts';
import { EmulatorRequestError, errorEnvelope } from './errors.ts';
import { FaultInjector } from './faults.ts';
import type { EmulatorContext } from './pipeline.ts';
import { MinuteWindowLimiter, TokenBucketLimiter } from './rate-limit.ts';
import { registerAdminRoutes } from './routes/admin.ts';
import { registerConsentRoutes } from './routes/consent.ts';
import { registerKeyRoutes } from './routes/keys.ts';
import { registerOAuthRoutes } from './routes/oauth.ts';
import { registerProjectRoutes } from './routes/projects.ts';
import { loadEmulatorSeed, type EmulatorSeed } from './seed.ts';
import { EmulatorState } from './state.ts';

export type { EmulatorFault, EmulatorOperation } from './faults.ts';
export { FaultInjector } from './faults.ts';
export type { EmulatorSeed } from './seed.ts';
export { EmulatorState } from './state.ts';

/** "1 MB" in the spec, read as 1 MiB: a body of 1,048,576 bytes passes, one byte more is a 413. */
export const MAX_BODY_BYTES = 1_048_576;
export const DEFAULT_ROLL_RATE_LIMIT_PER_MINUTE = 600;

export interface StartEmulatorOptions {
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0 (a free port). */
  port?: number;
  /** A seed object, or a path to a YAML/JSON seed; default config/emulator-seed.yaml. */
  seed?: EmulatorSeed | string;
  /** Enables the /_emulator/ admin routes; the in-process `faults` always works. */
  faultInjection?: boolean;
  /** Clock in ms, for rate-limit windows and token expiry. */
  now?: () => number;
  /** Rolls per minute shared by all OAuth/session principals (default 600; benchmarks raise it). */
  rollRateLimitPerMinute?: number;
  /**
   * When set, principal rolls are limited by a token bucket holding this many seconds of
   * `rollRateLimitPerMinute` (refilled continuously) instead of fixed clock-minute windows, so a
   * client faster than the rate meets 429 within a second. Must be a positive number.
   */
  rollRateBurstSeconds?: number;
  /** Lifetime of tokens from /oauth/token; default from the seed (3600 s). */
  oauthTokenTtlSeconds?: number;
  /** How a `delay` fault waits; tests may pass a controllable one. */
  sleep?: (ms: number) => Promise<void>;
  /** Fastify request logging (no headers or bodies are logged); default false. */
  logger?: boolean;
}

export interface RunningEmulator {
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  port: number;
  /** Read and change the world (test-only accessors included). */
  state: EmulatorState;
  /** inject(op, fault, count = 1); clear(); pending(op). */
  faults: FaultInjector;
  close(): Promise<void>;
}

export async function startEmulator(options: StartEmulatorOptions = {}): Promise<RunningEmulator> {
  const seed = await loadEmulatorSeed(options.seed);
  if (options.oauthTokenTtlSeconds !== undefined) seed.oauth.tokenTtlSeconds = options.oauthTokenTtlSeconds;
  const now = options.now ?? Date.now;
  const shutdown = new AbortController();
  const limiter = new MinuteWindowLimiter(now);
  const ctx: EmulatorContext = {
    state: new EmulatorState(seed, now),
    faults: new FaultInjector(),
    limiter,
    // Throws on a burst that is not a positive number, before anything listens.
    rollLimiter:
      options.rollRateBurstSeconds === undefined
        ? limiter
        : new TokenBucketLimiter(now, options.rollRateBurstSeconds),
    cursors: new CursorCodec(),
    rollRateLimitPerMinute: options.rollRateLimitPerMinute ?? DEFAULT_ROLL_RATE_LIMIT_PER_MINUTE,
    // A delay must not hold the process open after close().
    sleep: options.sleep ?? ((ms) => sleepFor(ms, undefined, { signal: shutdown.signal })),
  };
  const app = buildEmulatorApp(ctx, {
    faultInjection: options.faultInjection ?? false,
    logger: options.logger ?? false,
  });
  const host = options.host ?? '127.0.0.1';
  await app.listen({ host, port: options.port ?? 0 });
  const port = (app.server.address() as AddressInfo).port;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    port,
    state: ctx.state,
    faults: ctx.faults,
    async close() {
      shutdown.abort();
      await app.close();
    },
  };
}

export function buildEmulatorApp(
  ctx: EmulatorContext,
  options: { faultInjection: boolean; logger: boolean },
): FastifyInstance {
  const app = Fastify({
    logger: options.logger,
    bodyLimit: MAX_BODY_BYTES,
    // Hung and keep-alive connections must not keep close() waiting.
    forceCloseConnections: true,
  });
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (_request, body, done) => {
      done(null, new URLSearchParams(body.toString()));
    },
  );
  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof EmulatorRequestError) {
      if (error.retryAfterSeconds !== undefined)
        void reply.header('retry-after', String(error.retryAfterSeconds));
      return reply.code(error.status).send(errorEnvelope(error.apiCode, error.message, error.details));
    }
    const status = typeof error.statusCode === 'number' ? error.statusCode : 500;
    if (status === 413) {
      return reply.code(413).send(
        errorEnvelope('PAYLOAD_TOO_LARGE', 'The request body exceeds 1 MB.', {
          limitBytes: MAX_BODY_BYTES,
        }),
      );
    }
    if (status >= 400 && status < 500) {
      // Fixed message: a parser's message can quote the body it choked on.
      return reply
        .code(400)
        .send(errorEnvelope('INVALID_PAYLOAD', 'The request could not be parsed.', { reason: error.code }));
    }
    request.log.error({ errorCode: error.code, errorName: error.name }, 'emulator handler failed');
    return reply.code(500).send(errorEnvelope('INTERNAL_ERROR', 'An unexpected internal error occurred.'));
  });
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(
      errorEnvelope('NOT_FOUND', 'No such route.', {
        method: request.method,
        path: request.url.split('?')[0],
      }),
    ),
  );
  registerKeyRoutes(app, ctx);
  registerProjectRoutes(app, ctx);
  registerConsentRoutes(app, ctx);
  registerOAuthRoutes(app, ctx);
  if (options.faultInjection) registerAdminRoutes(app, ctx);
  return app;
}
