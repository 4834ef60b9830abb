import { Type } from 'typebox';
import { NullablePolicyFields, POLICY_BOUNDS } from '../../config/schema.js';
import { Nullable } from '../../http/schemas.js';

/** The policy fields as request body properties (each optional; the optional limits take null = none). */
export const PolicyFieldsBody = {
  ...NullablePolicyFields,
  requests_per_minute: Type.Optional(Type.Integer(POLICY_BOUNDS.requests_per_minute)),
  burst_limit: Type.Optional(Type.Integer(POLICY_BOUNDS.burst_limit)),
};

/** Ceilings as a request body object: any field, null = no ceiling. */
export const CeilingsBody = Type.Object(NullablePolicyFields, { additionalProperties: false, minProperties: 1 });

/** The policy as answered: every field, null = none. */
export const PolicyView = {
  requests_per_minute: Type.Integer(),
  burst_limit: Type.Integer(),
  tokens_per_minute: Nullable(Type.Integer()),
  max_concurrent_requests: Nullable(Type.Integer()),
  daily_tokens: Nullable(Type.Integer()),
  monthly_tokens: Nullable(Type.Integer()),
  monthly_cost: Nullable(Type.Number()),
};

/** The effective ceilings (the project's own, else the config's): every field, null = none. */
export const CeilingsView = Type.Object({
  ...PolicyView,
  requests_per_minute: Nullable(Type.Integer()),
  burst_limit: Nullable(Type.Integer()),
});
