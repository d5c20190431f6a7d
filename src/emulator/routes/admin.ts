// Test and demo controls under /_emulator/, registered only when fault injection is enabled.
// No secret ever leaves through these routes: a test that holds a candidate secret can ask
// whether it is live, and nothing here answers with a secret.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { EmulatorRequestError } from '../errors.ts';
import { EMULATOR_OPERATIONS, type EmulatorOperation } from '../faults.ts';
import type { EmulatorContext } from '../pipeline.ts';
import { PLANS } from '../plans.ts';
import type { ApiKeyRecord } from '../state.ts';
import { parseBody } from './body.ts';

export const InjectedFault = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('status'),
    status: z.int().min(100).max(599),
    code: z.string().optional(),
    retryAfter: z.string().optional(),
  }),
  z.strictObject({ kind: z.literal('delay'), ms: z.int().min(0).max(600_000) }),
  z.strictObject({ kind: z.literal('drop') }),
  z.strictObject({ kind: z.literal('failAfterApply'), then: z.enum(['status500', 'drop', 'hang']) }),
  z.strictObject({
    kind: z.literal('malformed'),
    body: z.string(),
    contentType: z.string().optional(),
    status: z.int().min(100).max(599).optional(),
  }),
]);

export const FaultRequest = z.strictObject({
  operation: z.enum(EMULATOR_OPERATIONS),
  fault: InjectedFault,
  count: z.int().min(1).max(10_000).default(1),
});

export const OrganizationChange = z.strictObject({
  plan: z.enum(PLANS).optional(),
  downgraded: z.boolean().optional(),
});

const SecretCheck = z.strictObject({ secret: z.string() });

export function registerAdminRoutes(app: FastifyInstance, ctx: EmulatorContext): void {
  const { state, faults } = ctx;
  const pendingFaults = (): Record<EmulatorOperation, number> =>
    Object.fromEntries(EMULATOR_OPERATIONS.map((op) => [op, faults.pending(op)])) as Record<
      EmulatorOperation,
      number
    >;
  const knownKey = (keyId: string): ApiKeyRecord => {
    const key = state.apiKeys.get(keyId);
    if (key === undefined)
      throw new EmulatorRequestError(404, 'No API key with this id.', { details: { keyId } });
    return key;
  };
  const keyView = (key: ApiKeyRecord): Record<string, unknown> => ({
    keyId: key.id,
    name: key.name,
    organizationId: key.organizationId,
    rateLimitPerMinute: key.rateLimitPerMinute,
    rollCount: key.rollCount,
  });

  app.get('/_emulator/faults', () => ({ success: true, data: { pending: pendingFaults() } }));
  app.post<{ Body: unknown }>('/_emulator/faults', (request) => {
    const { operation, fault, count } = parseBody(FaultRequest, request.body);
    faults.inject(operation, fault, count);
    return { success: true, data: { pending: pendingFaults() } };
  });
  app.delete('/_emulator/faults', () => {
    faults.clear();
    return { success: true, data: { pending: pendingFaults() } };
  });

  app.get('/_emulator/stats', () => ({
    success: true,
    data: {
      totalRolls: state.totalRolls(),
      calls: Object.fromEntries(EMULATOR_OPERATIONS.map((op) => [op, state.callCount(op)])),
    },
  }));
  app.get('/_emulator/keys', () => ({ success: true, data: [...state.apiKeys.values()].map(keyView) }));
  app.get<{ Params: { keyId: string } }>('/_emulator/keys/:keyId', (request) => ({
    success: true,
    data: keyView(knownKey(request.params.keyId)),
  }));
  app.post<{ Params: { keyId: string }; Body: unknown }>('/_emulator/keys/:keyId/check', (request) => {
    const key = knownKey(request.params.keyId);
    const { secret } = parseBody(SecretCheck, request.body);
    return { success: true, data: { live: state.isLiveSecret(key.id, secret) } };
  });
  app.post<{ Params: { keyId: string } }>('/_emulator/keys/:keyId/revoke', (request) => {
    const key = knownKey(request.params.keyId);
    state.revokeKey(key.id);
    return { success: true, data: keyView(key) };
  });
  app.patch<{ Params: { orgId: string }; Body: unknown }>('/_emulator/organizations/:orgId', (request) => {
    const org = state.organizations.get(request.params.orgId);
    if (org === undefined)
      throw new EmulatorRequestError(404, 'No organization with this id.', {
        details: { organizationId: request.params.orgId },
      });
    const change = parseBody(OrganizationChange, request.body);
    if (change.plan !== undefined) state.setPlan(org.id, change.plan);
    if (change.downgraded !== undefined) state.setDowngraded(org.id, change.downgraded);
    return { success: true, data: { ...org } };
  });
}
