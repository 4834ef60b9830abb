import { Type } from 'typebox';
import { POLICY_BOUNDS } from '../config/schema.js';
import { Nullable } from '../http/schemas.js';

/** The policy fields as request body properties (each optional; the optional limits take null = none). */
export const PolicyFieldsBody = {
  requests_per_minute: Type.Optional(Type.Integer(POLICY_BOUNDS.requests_per_minute)),
  burst_limit: Type.Optional(Type.Integer(POLICY_BOUNDS.burst_limit)),
  tokens_per_minute: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.tokens_per_minute))),
  max_concurrent_requests: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.max_concurrent_requests))),
  daily_tokens: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.daily_tokens))),
  monthly_tokens: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.monthly_tokens))),
  monthly_cost: Type.Optional(Nullable(Type.Number(POLICY_BOUNDS.monthly_cost))),
};

/** Ceilings as a request body object: any field, null = no ceiling. */
export const CeilingsBody = Type.Object(
  {
    requests_per_minute: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.requests_per_minute))),
    burst_limit: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.burst_limit))),
    tokens_per_minute: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.tokens_per_minute))),
    max_concurrent_requests: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.max_concurrent_requests))),
    daily_tokens: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.daily_tokens))),
    monthly_tokens: Type.Optional(Nullable(Type.Integer(POLICY_BOUNDS.monthly_tokens))),
    monthly_cost: Type.Optional(Nullable(Type.Number(POLICY_BOUNDS.monthly_cost))),
  },
  { additionalProperties: false, minProperties: 1 },
);

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
