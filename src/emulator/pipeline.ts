// What every API call goes through before and after its handler: fault injection, bearer
// authentication (before the body is read, so an anonymous caller cannot make the emulator
// buffer a megabyte), the API-key plan rule (402) and rate limits (429); and, after the
// handler applied the change, the faults that lose the answer.
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { authenticate, type Caller } from './auth.ts';
import type { CursorCodec } from './cursor.ts';
import { EmulatorRequestError, defaultCodeForStatus, errorEnvelope } from './errors.ts';
import type { EmulatorFault, EmulatorOperation, FaultInjector } from './faults.ts';
import { allowsApiKeys } from './plans.ts';
import type { CallLimiter, RateVerdict } from './rate-limit.ts';
import type { EmulatorState } from './state.ts';

export interface EmulatorContext {
  state: EmulatorState;
  faults: FaultInjector;
  /** Per-API-key limits (fixed minute windows). */
  limiter: CallLimiter;
  /** The roll limit of OAuth/session principals: the same fixed windows, or a token bucket (`rollRateBurstSeconds`). */
  rollLimiter: CallLimiter;
  cursors: CursorCodec;
  /** Rolls per minute shared by every OAuth/session principal of the emulator. */
  rollRateLimitPerMinute: number;
  sleep: (ms: number) => Promise<void>;
}

type AfterApplyFault = Extract<EmulatorFault, { kind: 'failAfterApply' | 'malformed' }>;

interface CallContext {
  caller: Caller;
  fault: AfterApplyFault | undefined;
}

const calls = new WeakMap<FastifyRequest, CallContext>();

/** The onRequest hook of one API operation. */
export function guardOperation(
  ctx: EmulatorContext,
  operation: EmulatorOperation,
): onRequestAsyncHookHandler {
  return async function guard(request, reply) {
    ctx.state.recordCall(operation);
    const fault = ctx.faults.take(operation);
    let afterApply: AfterApplyFault | undefined;
    if (fault !== undefined) {
      switch (fault.kind) {
        case 'status':
          sendInjectedStatus(reply, fault);
          return reply;
        case 'drop':
          dropConnection(request, reply);
          return reply;
        case 'delay':
          await ctx.sleep(fault.ms);
          break;
        case 'malformed':
          // Only a roll applies before a malformed answer: its interesting case is a secret
          // that was minted but arrives in a body the client cannot parse.
          if (operation !== 'roll') {
            sendRaw(reply, fault, undefined);
            return reply;
          }
          afterApply = fault;
          break;
        case 'failAfterApply':
          afterApply = fault;
          break;
      }
    }
    const caller = authenticate(request.headers.authorization, ctx.state);
    enforceCallerLimits(ctx, operation, caller);
    calls.set(request, { caller, fault: afterApply });
    return undefined;
  };
}

function enforceCallerLimits(ctx: EmulatorContext, operation: EmulatorOperation, caller: Caller): void {
  if (caller.kind === 'apiKey') {
    const org = ctx.state.organization(caller.organizationId);
    if (!allowsApiKeys(org)) {
      throw new EmulatorRequestError(
        402,
        'API access with organization API keys requires the Starter plan or higher and an organization in good standing.',
        {
          apiCode: 'PLAN_REQUIRED',
          details: {
            organizationId: org.id,
            plan: org.plan,
            downgraded: org.downgraded,
            requiredPlan: 'starter',
          },
        },
      );
    }
    refuseWhenLimited(
      ctx.limiter.take(`key:${caller.keyId}`, caller.rateLimitPerMinute),
      caller.rateLimitPerMinute,
    );
    return;
  }
  if (operation === 'roll') {
    refuseWhenLimited(
      ctx.rollLimiter.take('principal-rolls', ctx.rollRateLimitPerMinute),
      ctx.rollRateLimitPerMinute,
    );
  }
}

function refuseWhenLimited(verdict: RateVerdict, perMinute: number): void {
  if (verdict.allowed) return;
  throw new EmulatorRequestError(429, 'Rate limit exceeded; retry after the time given in Retry-After.', {
    details: { limitPerMinute: perMinute },
    retryAfterSeconds: verdict.retryAfterSeconds,
  });
}

/** The authenticated caller of a request that passed its guard. */
export function callerOf(request: FastifyRequest): Caller {
  const call = calls.get(request);
  if (call === undefined) throw new EmulatorRequestError(500, 'Request reached a handler without its guard.');
  return call.caller;
}

/**
 * Sends the handler's answer, unless a fault says the answer is lost. The change is already
 * applied at this point, which is the whole point of these faults: the client must cope with
 * "it happened but I was not told".
 */
export function deliver(
  request: FastifyRequest,
  reply: FastifyReply,
  body: unknown,
  mintedSecret?: string,
): FastifyReply {
  const fault = calls.get(request)?.fault;
  if (fault === undefined) return reply.send(body);
  if (fault.kind === 'malformed') return sendRaw(reply, fault, mintedSecret);
  switch (fault.then) {
    case 'status500':
      return reply.code(500).send(errorEnvelope('INTERNAL_ERROR', 'An unexpected internal error occurred.'));
    case 'drop':
      dropConnection(request, reply);
      return reply;
    case 'hang':
      // Never answer; the socket stays open until the client gives up or the emulator closes.
      reply.hijack();
      return reply;
  }
}

function sendInjectedStatus(reply: FastifyReply, fault: Extract<EmulatorFault, { kind: 'status' }>): void {
  if (fault.retryAfter !== undefined) void reply.header('retry-after', fault.retryAfter);
  void reply
    .code(fault.status)
    .send(errorEnvelope(fault.code ?? defaultCodeForStatus(fault.status), 'Injected fault.'));
}

function sendRaw(
  reply: FastifyReply,
  fault: Extract<EmulatorFault, { kind: 'malformed' }>,
  mintedSecret: string | undefined,
): FastifyReply {
  const body = mintedSecret === undefined ? fault.body : fault.body.replaceAll('{{key}}', mintedSecret);
  return reply
    .code(fault.status ?? 200)
    .type(fault.contentType ?? 'application/json')
    .send(body);
}

function dropConnection(request: FastifyRequest, reply: FastifyReply): void {
  reply.hijack();
  request.raw.socket.destroy();
}
