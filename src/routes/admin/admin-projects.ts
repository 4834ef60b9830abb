import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { decodeCursor, encodeCursor } from '../../http/cursor.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { resourceNotFound } from '../../http/errors.js';
import { isGatewayId } from '../../core/ids.js';
import { Cursor, errorResponses, Nullable, PageLimit } from '../../http/schemas.js';
import { ProjectParams } from './admin-policy.js';
import { ProjectFields, projectView } from '../management/project-view.js';
import { auditEvent } from '../audit-event.js';

const ProjectSummary = Type.Object({ id: Type.String(), ...ProjectFields });

/** The project lifecycle of the admin API: list and delete (creation is in admin.ts, read and policy in admin-policy.ts). */
export const adminProjectRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store } = ctx;

  app.get(
    '/admin/v1/projects',
    {
      schema: {
        summary: 'List projects, newest first',
        querystring: Type.Object({ limit: Type.Optional(PageLimit), cursor: Type.Optional(Cursor) }, { additionalProperties: false }),
        response: {
          200: envelopeSchema({ data: Type.Array(ProjectSummary), has_more: Type.Boolean(), next_cursor: Nullable(Type.String()) }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const { limit = 20, cursor } = request.query;
      const after = cursor === undefined ? null : decodeCursor(cursor, (id) => isGatewayId('proj', id));
      const page = await store.projects.list(limit, after);
      const last = page.data.at(-1);
      const data = page.data.map((project) => ({ id: project.id, ...projectView(project, ctx.config) }));
      return envelope('projects', { data, has_more: page.hasMore, next_cursor: page.hasMore && last ? encodeCursor(last.id) : null });
    },
  );

  app.delete(
    '/admin/v1/projects/:project_id',
    {
      schema: {
        summary: 'Delete a project: its keys stop working on every replica, its data goes (usage buckets expire with their retention)',
        params: ProjectParams,
        response: { 200: envelopeSchema({ deleted: Type.Literal(true) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      const time = ctx.now();
      const retainAuditMs = ctx.config.usage.hour_retention_days * 86_400_000;
      const deleted = await store.projects.delete(projectId, auditEvent(request, 'project.delete', projectId, null, time), retainAuditMs);
      if (!deleted) throw resourceNotFound('project', 'project_id');
      await ctx.authenticator.invalidate(deleted.secretHashes);
      request.log.info({ project_id: projectId, keys_invalidated: deleted.secretHashes.length }, 'project deleted');
      return envelope(projectId, { deleted: true as const });
    },
  );
};
