import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import type { GatewayConfig } from '../config/gateway-config.js';
import { envelope, envelopeSchema } from '../http/envelope.js';
import { resourceNotFound } from '../http/errors.js';
import { errorResponses, IsoTime, Nullable } from '../http/schemas.js';
import type { ProjectRecord } from '../store/types.js';
import { auditEvent } from './audit-event.js';
import { checkCostBudget, effectiveCeilings } from './policy-rules.js';
import { CeilingsBody, CeilingsView, PolicyFieldsBody, PolicyView } from './policy-schemas.js';

export const ProjectFields = {
  name: Type.String(),
  environment: Nullable(Type.String()),
  created_at: IsoTime,
  updated_at: IsoTime,
  rate_limits: Type.Object(PolicyView),
  ceilings: CeilingsView,
};

const ProjectParams = Type.Object({ project_id: Type.String({ maxLength: 128 }) });

/** A project as the admin API shows it: settings, policy and effective ceilings. */
export function projectView(project: ProjectRecord, config: GatewayConfig) {
  return {
    name: project.name,
    environment: project.environment,
    created_at: project.created_at,
    updated_at: project.updated_at,
    rate_limits: project.rate_limits,
    ceilings: effectiveCeilings(project.ceilings, config),
  };
}

/** The operator's view of a project's quota: read it, and set policy and ceilings to any value. */
export const adminPolicyRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store, now, config } = ctx;

  app.get(
    '/admin/v1/projects/:project_id',
    {
      schema: {
        summary: 'A project: settings, quota policy and effective ceilings',
        params: ProjectParams,
        response: { 200: envelopeSchema(ProjectFields), ...errorResponses },
      },
    },
    async (request) => {
      const project = await store.projects.get(request.params.project_id);
      if (!project) throw resourceNotFound('project', 'project_id');
      return envelope(project.id, projectView(project, config));
    },
  );

  app.patch(
    '/admin/v1/projects/:project_id',
    {
      schema: {
        summary: 'Set policy fields and ceilings of a project, with no ceiling check (null ceiling: none)',
        params: ProjectParams,
        body: Type.Object({ ...PolicyFieldsBody, ceilings: Type.Optional(CeilingsBody) }, { additionalProperties: false, minProperties: 1 }),
        response: { 200: envelopeSchema(ProjectFields), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      const { ceilings, ...policy } = request.body;
      checkCostBudget(policy, config);
      const time = now();
      const project = await store.projects.updatePolicy(
        projectId,
        { rate_limits: policy, ceilings },
        new Date(time).toISOString(),
        auditEvent(request, ceilings ? 'project.ceilings.update' : 'project.rate_limits.update', projectId, null, time, JSON.stringify(request.body)),
      );
      if (!project) throw resourceNotFound('project', 'project_id');
      request.log.info({ project_id: projectId, rate_limits: project.rate_limits, ceilings: project.ceilings }, 'project policy set by the admin');
      return envelope(projectId, projectView(project, config));
    },
  );
};
