import { Type } from 'typebox';
import type { GatewayConfig } from '../../config/gateway-config.js';
import { IsoTime, Nullable } from '../../http/schemas.js';
import type { ProjectRecord } from '../../store/types.js';
import { PrioritySchema } from './api-key-view.js';
import { effectiveCeilings } from './policy-rules.js';
import { CeilingsView, PolicyView } from './policy-schemas.js';

export const ProjectFields = {
  name: Type.String(),
  environment: Nullable(Type.String()),
  created_at: IsoTime,
  updated_at: IsoTime,
  rate_limits: Type.Object(PolicyView),
  ceilings: CeilingsView,
  priority: Nullable(PrioritySchema),
};

/** A project as the admin API and GET /v1/projects/:id show it: settings, policy and effective ceilings. */
export function projectView(project: ProjectRecord, config: GatewayConfig) {
  return {
    name: project.name,
    environment: project.environment,
    created_at: project.created_at,
    updated_at: project.updated_at,
    rate_limits: project.rate_limits,
    ceilings: effectiveCeilings(project.ceilings, config),
    priority: project.priority ?? null,
  };
}

