import { Type } from 'typebox';
import { IsoTime, Nullable } from '../http/schemas.js';

const RateLimits = Type.Object({ requests_per_minute: Type.Integer(), burst_limit: Type.Integer() });

/** A project as the admin API shows it (beside the envelope). */
export const ProjectFields = {
  name: Type.String(),
  environment: Nullable(Type.String()),
  created_at: IsoTime,
  updated_at: IsoTime,
  rate_limits: RateLimits,
};

export const ProjectParams = Type.Object({ project_id: Type.String({ maxLength: 128 }) });
