import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { projectMismatch, resourceNotFound } from '../../http/errors.js';
import { errorResponses, IsoTime, Nullable, ProjectIdParam } from '../../http/schemas.js';
import { readUsage } from './usage-query.js';
import type { ProjectRecord } from '../../store/types.js';
import { auditEvent } from '../audit-event.js';
import { checkCeilings, checkCostBudget, effectiveCeilings } from './policy-rules.js';
import { CeilingsView, PolicyFieldsBody, PolicyView } from './policy-schemas.js';
import { principalOf } from '../principal-of-request.js';
import type { UsageAnswer } from './usage-schemas.js';
import { UsageAnswerFields, UsageQuerySchema } from './usage-schemas.js';
import { ProjectFields, projectView as fullProjectView } from './project-view.js';

const ProjectParams = Type.Object({ project_id: ProjectIdParam });

const projectView = (project: ProjectRecord) => ({
  name: project.name,
  environment: project.environment,
  created_at: project.created_at,
  updated_at: project.updated_at,
});

/** A project's usage answer (docs/limits-and-usage.md, "Usage"), for GET /v1/projects/:id/usage and its admin twin. */
export async function projectUsage(ctx: AppContext, projectId: string, query: Static<typeof UsageQuerySchema>) {
  const { start_time: startTime, end_time: endTime, bucket_width: bucketWidth, group_by: groupBy } = query;
  const usage = await readUsage(ctx.store.usage, projectId, { startTime, endTime, bucketWidth, groupBy }, ctx.now(), {
    minuteMs: ctx.config.usage.minute_retention_hours * 3_600_000,
    hourMs: ctx.config.usage.hour_retention_days * 86_400_000,
  });
  // readUsage builds exactly this shape (store/ and quota/ import no HTTP schema).
  return envelope(projectId, usage as Static<typeof UsageAnswer>);
}

/** Projects, rate limits and usage (docs/api.md): a key acts on its own project only (403 otherwise, existing or not); its policy stays within its ceilings. */
export const projectRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store, now } = ctx;

  const ownProject = (request: Parameters<typeof principalOf>[0], projectId: string) => {
    if (principalOf(request).projectId !== projectId) throw projectMismatch();
    return projectId;
  };

  app.put(
    '/v1/projects/:project_id',
    {
      config: { scope: 'project:write' },
      schema: {
        summary: 'Replace the project settings: name and environment (an omitted environment is cleared)',
        params: ProjectParams,
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 256 }),
            environment: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64 }))),
          },
          { additionalProperties: false },
        ),
        response: {
          200: envelopeSchema({ name: Type.String(), environment: Nullable(Type.String()), created_at: IsoTime, updated_at: IsoTime }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const projectId = ownProject(request, request.params.project_id);
      const time = now();
      const project = await store.projects.replace(
        projectId,
        { name: request.body.name, environment: request.body.environment ?? null, updated_at: new Date(time).toISOString() },
        auditEvent(request, 'project.update', projectId, null, time),
      );
      if (!project) throw resourceNotFound('project', 'project_id');
      return envelope(projectId, projectView(project));
    },
  );

  app.patch(
    '/v1/projects/:project_id/rate-limits',
    {
      config: { scope: 'project:write' },
      schema: {
        summary: 'Update the quota policy within the project ceilings; the next request on every replica is admitted under it',
        params: ProjectParams,
        body: Type.Object(PolicyFieldsBody, { additionalProperties: false, minProperties: 1 }),
        response: {
          200: envelopeSchema({ ...PolicyView, ceilings: CeilingsView, updated_at: IsoTime }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const projectId = ownProject(request, request.params.project_id);
      const current = await store.projects.get(projectId);
      if (!current) throw resourceNotFound('project', 'project_id');
      checkCeilings(request.body, current.ceilings, ctx.config);
      checkCostBudget(request.body, ctx.config);
      const time = now();
      const project = await store.projects.updatePolicy(
        projectId,
        { rate_limits: request.body },
        new Date(time).toISOString(),
        auditEvent(request, 'project.rate_limits.update', projectId, null, time, JSON.stringify(request.body)),
      );
      if (!project) throw resourceNotFound('project', 'project_id');
      request.log.info({ project_id: projectId, rate_limits: project.rate_limits }, 'rate-limit policy updated');
      return envelope(projectId, { ...project.rate_limits, ceilings: effectiveCeilings(project.ceilings, ctx.config), updated_at: project.updated_at });
    },
  );

  app.get(
    '/v1/projects/:project_id/usage',
    {
      config: { scope: 'usage:read' },
      schema: {
        summary: 'Usage of [start_time, end_time): requests, tokens, image generations, audio, storage',
        params: ProjectParams,
        querystring: UsageQuerySchema,
        response: {
          200: envelopeSchema(UsageAnswerFields),
          ...errorResponses,
        },
      },
    },
    async (request) => projectUsage(ctx, ownProject(request, request.params.project_id), request.query),
  );

  app.get(
    '/v1/projects/:project_id',
    {
      // Any key of the project: it is told its limits in every answer's headers already.
      config: { scope: null },
      schema: {
        summary: 'The project of the key: settings, quota policy and effective ceilings',
        params: ProjectParams,
        response: { 200: envelopeSchema(ProjectFields), ...errorResponses },
      },
    },
    async (request) => {
      const projectId = ownProject(request, request.params.project_id);
      const project = await store.projects.get(projectId);
      if (!project) throw resourceNotFound('project', 'project_id');
      return envelope(projectId, fullProjectView(project, ctx.config));
    },
  );
};
