// Roll API key: POST /v1/auth/keys/{keyId}/roll. The old secret dies the instant the new one
// is minted; the new one is in this answer and nowhere else.
import type { FastifyInstance } from 'fastify';
import { roleIn, activeOrganizationId } from '../auth.ts';
import { EmulatorRequestError } from '../errors.ts';
import { singleQueryValue, requireId, type Query } from '../params.ts';
import { callerOf, deliver, guardOperation, type EmulatorContext } from '../pipeline.ts';
import { allowsApiKeys } from '../plans.ts';

export function registerKeyRoutes(app: FastifyInstance, ctx: EmulatorContext): void {
  app.post<{ Params: { keyId: string }; Querystring: Query }>(
    '/v1/auth/keys/:keyId/roll',
    { onRequest: guardOperation(ctx, 'roll') },
    async (request, reply) => {
      const caller = callerOf(request);
      if (caller.kind === 'apiKey') {
        throw new EmulatorRequestError(
          403,
          'An API key cannot roll itself or any key; use an owner or admin OAuth or session principal.',
        );
      }
      const keyId = requireId(request.params.keyId, 'keyId');
      const requestedOrg = singleQueryValue(request.query, 'organizationId');
      const orgId =
        requestedOrg === undefined ? activeOrganizationId(caller) : requireId(requestedOrg, 'organizationId');
      const role = roleIn(caller, orgId);
      if (role === undefined) {
        throw new EmulatorRequestError(403, 'The principal has no access to this organization.', {
          details: { organizationId: orgId },
        });
      }
      if (role !== 'owner' && role !== 'admin') {
        throw new EmulatorRequestError(403, 'Rolling an API key requires the owner or admin role.', {
          details: { organizationId: orgId, role },
        });
      }
      const org = ctx.state.organization(orgId);
      if (!allowsApiKeys(org)) {
        throw new EmulatorRequestError(
          402,
          'Organization API keys require the Starter plan or higher and an organization in good standing.',
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
      // Keys are looked up inside the organization: a key of another organization is "not found"
      // rather than "forbidden", so the answer does not reveal that it exists.
      const key = ctx.state.apiKeys.get(keyId);
      if (key?.organizationId !== orgId) {
        throw new EmulatorRequestError(404, 'No API key with this id in the organization.', {
          details: { keyId, organizationId: orgId },
        });
      }
      const secret = ctx.state.rollKey(keyId);
      return deliver(request, reply, { success: true, data: { key: secret, keyId } }, secret);
    },
  );
}
