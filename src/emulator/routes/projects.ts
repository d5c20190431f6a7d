// List projects (GET /v1/projects) and update a project (PATCH, or PUT, /v1/projects/{projectId}).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { visibleOrganizationIds } from '../auth.ts';
import { EmulatorRequestError } from '../errors.ts';
import { singleQueryValue, requireId, type Query } from '../params.ts';
import { callerOf, deliver, guardOperation, type EmulatorContext } from '../pipeline.ts';
import { writableProject } from '../project-access.ts';
import { slugify } from '../slug.ts';
import { projectView } from '../views.ts';
import { parseBody } from './body.ts';

const MAX_PAGE = 100;

export const ProjectUpdate = z
  .strictObject({
    projectName: z.string().trim().min(1).max(200).optional(),
    description: z.string().max(2000).nullable().optional(),
  })
  .refine((body) => body.projectName !== undefined || body.description !== undefined, {
    message: 'give projectName, description, or both',
  });

export function registerProjectRoutes(app: FastifyInstance, ctx: EmulatorContext): void {
  app.get<{ Querystring: Query }>(
    '/v1/projects',
    { onRequest: guardOperation(ctx, 'listProjects') },
    async (request, reply) => {
      const caller = callerOf(request);
      const limit = parseLimit(singleQueryValue(request.query, 'limit'));
      const orgFilter = singleQueryValue(request.query, 'organizationId');
      const visible = visibleOrganizationIds(caller);
      if (orgFilter !== undefined && !visible.includes(requireId(orgFilter, 'organizationId'))) {
        throw new EmulatorRequestError(403, 'The caller has no access to this organization.', {
          details: { organizationId: orgFilter },
        });
      }
      const orgIds = orgFilter === undefined ? visible : [orgFilter];
      // Ordered by id so a cursor ("after this id") stays meaningful while projects change.
      const all = [...ctx.state.projects.values()]
        .filter((p) => orgIds.includes(p.organizationId))
        .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));

      const cursorText = singleQueryValue(request.query, 'cursor');
      let start = 0;
      if (cursorText !== undefined) {
        const position = ctx.cursors.decode(cursorText);
        if (position?.organizationId !== (orgFilter ?? null)) {
          throw new EmulatorRequestError(400, 'The cursor is invalid or belongs to another query.', {
            details: { parameter: 'cursor' },
          });
        }
        const next = all.findIndex((p) => p.id > position.after);
        start = next === -1 ? all.length : next;
      }
      const page = all.slice(start, start + limit);
      const hasMore = start + limit < all.length;
      const last = page[page.length - 1];
      const nextCursor =
        hasMore && last !== undefined
          ? ctx.cursors.encode({ after: last.id, organizationId: orgFilter ?? null })
          : null;
      return deliver(request, reply, {
        success: true,
        data: page.map((p) => projectView(ctx.state, p)),
        pagination: { nextCursor, hasMore },
      });
    },
  );

  app.route<{ Params: { projectId: string }; Body: unknown }>({
    method: ['PATCH', 'PUT'],
    url: '/v1/projects/:projectId',
    onRequest: guardOperation(ctx, 'updateProject'),
    handler: async (request, reply) => {
      const caller = callerOf(request);
      const project = writableProject(ctx.state, caller, requireId(request.params.projectId, 'projectId'));
      const update = parseBody(ProjectUpdate, request.body);
      let slug = project.slug;
      if (update.projectName !== undefined) {
        slug = slugify(update.projectName);
        if (slug === '') {
          throw new EmulatorRequestError(400, 'projectName must contain at least one letter or digit.', {
            details: { field: 'projectName' },
          });
        }
        const clash = [...ctx.state.projects.values()].find(
          (p) => p.id !== project.id && p.organizationId === project.organizationId && p.slug === slug,
        );
        if (clash !== undefined) {
          throw new EmulatorRequestError(409, 'Another project of the organization already has this slug.', {
            details: { projectSlug: slug, projectId: clash.id },
          });
        }
      }
      if (update.projectName !== undefined) {
        project.name = update.projectName;
        project.slug = slug;
      }
      if (update.description !== undefined) project.description = update.description;
      return deliver(request, reply, { success: true, data: projectView(ctx.state, project) });
    },
  });
}

function parseLimit(text: string | undefined): number {
  const limit = text !== undefined && /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN;
  if (!(limit >= 1 && limit <= MAX_PAGE)) {
    throw new EmulatorRequestError(400, 'limit is required and must be an integer from 1 to 100.', {
      details: { parameter: 'limit' },
    });
  }
  return limit;
}
