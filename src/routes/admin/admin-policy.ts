import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { resourceNotFound } from '../../http/errors.js';
import { errorResponses, Nullable } from '../../http/schemas.js';
import { PrioritySchema } from '../management/api-key-view.js';
import { auditEvent } from '../audit-event.js';
import { checkCostBudget } from '../management/policy-rules.js';
import { CeilingsBody, PolicyFieldsBody } from '../management/policy-schemas.js';
import { projectUsage } from '../management/projects.js';
import { UsageAnswerFields, UsageQuerySchema } from '../management/usage-schemas.js';
import { ProjectFields, projectView } from '../management/project-view.js';

export const ProjectParams = Type.Object({ project_id: Type.String({ maxLength: 128 }) });

/** What the admin sees of one project beyond its view: live keys, and its stored conversations against their bound. */
const ProjectDetailFields = {
  key_count: Type.Integer(),
  conversations: Type.Object({ bytes_held: Type.Integer(), max_bytes: Type.Integer() }),
};

async function projectDetails(ctx: AppContext, projectId: string) {
  const [keyCount, held] = await Promise.all([
    ctx.store.projects.keyCount(projectId),
    ctx.store.conversations.held(projectId, ctx.config.conversations.max_bytes_per_project),
  ]);
  return { key_count: keyCount, conversations: { bytes_held: held.bytes, max_bytes: held.maxBytes } };
}

/** The operator's view of a project's quota: read it, and set policy and ceilings to any value. */
export const adminPolicyRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store, now, config } = ctx;

  app.get(
    '/admin/v1/projects/:project_id',
    {
      schema: {
        summary: 'A project: settings, quota policy, effective ceilings, key count and stored-conversation bytes',
        params: ProjectParams,
        response: { 200: envelopeSchema({ ...ProjectFields, ...ProjectDetailFields }), ...errorResponses },
      },
    },
    async (request) => {
      const project = await store.projects.get(request.params.project_id);
      if (!project) throw resourceNotFound('project', 'project_id');
      return envelope(project.id, { ...projectView(project, config), ...(await projectDetails(ctx, project.id)) });
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/usage',
    {
      schema: {
        summary: 'Usage of a project, as GET /v1/projects/:project_id/usage answers it',
        params: ProjectParams,
        querystring: UsageQuerySchema,
        response: { 200: envelopeSchema(UsageAnswerFields), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      if (!(await store.projects.get(projectId))) throw resourceNotFound('project', 'project_id');
      return projectUsage(ctx, projectId, request.query);
    },
  );

  app.patch(
    '/admin/v1/projects/:project_id',
    {
      schema: {
        summary: 'Set policy fields, ceilings and priority of a project, with no ceiling check (null ceiling: none; null priority: normal)',
        params: ProjectParams,
        body: Type.Object(
          {
            ...PolicyFieldsBody,
            ceilings: Type.Optional(CeilingsBody),
            max_conversation_bytes: Type.Optional(Nullable(Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER }))),
            priority: Type.Optional(Nullable(PrioritySchema)),
          },
          { additionalProperties: false, minProperties: 1 },
        ),
        response: { 200: envelopeSchema({ ...ProjectFields, ...ProjectDetailFields }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      const { ceilings, max_conversation_bytes: maxConversationBytes, priority, ...policy } = request.body;
      checkCostBudget(policy, config);
      // A priority alone is a project setting; anything else, as before, a policy change.
      const action = ceilings ? 'project.ceilings.update' : priority !== undefined && Object.keys(policy).length === 0 ? 'project.update' : 'project.rate_limits.update';
      const time = now();
      const project = await store.projects.updatePolicy(
        projectId,
        { rate_limits: policy, ceilings, priority },
        new Date(time).toISOString(),
        auditEvent(request, action, projectId, null, time, JSON.stringify(request.body)),
      );
      if (!project) throw resourceNotFound('project', 'project_id');
      if (maxConversationBytes !== undefined) await store.conversations.setMaxBytes(projectId, maxConversationBytes);
      request.log.info({ project_id: projectId, rate_limits: project.rate_limits, ceilings: project.ceilings, priority: project.priority }, 'project policy set by the admin');
      return envelope(projectId, { ...projectView(project, config), ...(await projectDetails(ctx, projectId)) });
    },
  );
};
