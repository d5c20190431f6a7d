// Update project consent settings: PATCH (or PUT) /v1/projects/{projectId}/consent.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { EmulatorRequestError } from '../errors.ts';
import { checkTrustedOrigin } from '../origins.ts';
import { requireId } from '../params.ts';
import { callerOf, deliver, guardOperation, type EmulatorContext } from '../pipeline.ts';
import { BRANDING_NONE_PLANS, allowsBrandingNone } from '../plans.ts';
import { writableProject } from '../project-access.ts';
import { consentView } from '../views.ts';
import { parseBody } from './body.ts';

const MAX_ORIGINS = 100;

export const ConsentUpdate = z
  .strictObject({
    trustedOrigins: z.array(z.string()).max(MAX_ORIGINS).optional(),
    branding: z.enum(['brand_a', 'brand_b', 'none']).optional(),
  })
  .refine((body) => body.trustedOrigins !== undefined || body.branding !== undefined, {
    message: 'give trustedOrigins, branding, or both',
  });

export function registerConsentRoutes(app: FastifyInstance, ctx: EmulatorContext): void {
  app.route<{ Params: { projectId: string }; Body: unknown }>({
    method: ['PATCH', 'PUT'],
    url: '/v1/projects/:projectId/consent',
    onRequest: guardOperation(ctx, 'updateConsent'),
    handler: async (request, reply) => {
      const caller = callerOf(request);
      const project = writableProject(ctx.state, caller, requireId(request.params.projectId, 'projectId'));
      const instance =
        project.consentInstanceId === null
          ? undefined
          : ctx.state.consentInstances.get(project.consentInstanceId);
      if (instance === undefined) {
        throw new EmulatorRequestError(404, 'The project has no linked consent instance.', {
          details: { projectId: project.id },
        });
      }
      const update = parseBody(ConsentUpdate, request.body);
      if (update.trustedOrigins !== undefined) {
        update.trustedOrigins.forEach((origin, index) => {
          const verdict = checkTrustedOrigin(origin);
          if (!verdict.ok) {
            throw new EmulatorRequestError(
              400,
              `trustedOrigins[${index}] is not an allowed origin pattern.`,
              {
                apiCode: 'INVALID_ORIGIN',
                details: { index, origin: origin.slice(0, 200), reason: verdict.reason },
              },
            );
          }
        });
      }
      const org = ctx.state.organization(project.organizationId);
      if (update.branding === 'none' && !allowsBrandingNone(org)) {
        throw new EmulatorRequestError(403, 'Removing branding requires an eligible paid plan.', {
          apiCode: 'PLAN_REQUIRED',
          details: {
            organizationId: org.id,
            plan: org.plan,
            downgraded: org.downgraded,
            eligiblePlans: BRANDING_NONE_PLANS,
          },
        });
      }
      if (instance.locked) {
        throw new EmulatorRequestError(409, 'The consent instance is locked by another change in progress.', {
          details: { instanceId: instance.id },
        });
      }
      if (update.trustedOrigins !== undefined) instance.trustedOrigins = [...new Set(update.trustedOrigins)];
      if (update.branding !== undefined) instance.branding = update.branding;
      return deliver(request, reply, { success: true, data: consentView(ctx.state, project, instance) });
    },
  });
}
