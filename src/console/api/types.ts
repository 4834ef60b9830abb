/** The shapes the console reads from the gateway's admin and /v1 APIs (docs/api.md). */

export type Role = 'admin' | 'key';

export interface Session {
  role: Role;
  project_id: string | null;
  api_key_id: string | null;
  /** null: the admin, who may do everything. */
  scopes: string[] | null;
  expires_at: string;
  csrf_token: string;
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface RateLimits {
  requests_per_minute: number | null;
  burst_limit: number | null;
  tokens_per_minute: number | null;
  max_concurrent_requests: number | null;
  daily_tokens: number | null;
  monthly_tokens: number | null;
  monthly_cost: number | null;
}

export type Priority = 'high' | 'normal' | 'low';

export interface Project {
  id: string;
  name: string;
  environment: string | null;
  created_at: string;
  updated_at: string;
  rate_limits?: RateLimits;
  ceilings?: RateLimits;
  priority?: Priority | null;
  key_count?: number;
}

export interface KeyRateLimits {
  requests_per_minute: number | null;
  burst_limit: number | null;
  tokens_per_minute: number | null;
  max_concurrent_requests: number | null;
}

export interface KeyBudgets {
  daily_tokens: number | null;
  monthly_tokens: number | null;
  monthly_cost: number | null;
}

export interface ApiKey {
  id: string;
  name: string;
  project_id: string;
  redacted_value: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  models: string[] | null;
  scopes: string[];
  metadata: Record<string, string>;
  rate_limits: KeyRateLimits;
  budgets: KeyBudgets;
  priority: Priority | null;
}

/** A key just created or rotated: the only answer that carries its secret. */
export interface NewApiKey extends ApiKey {
  secret: string;
  previous_secret_expires_at?: string | null;
}

export interface NewProject extends Project {
  api_key: NewApiKey;
}

export interface KeyCreateBody {
  name: string;
  models?: string[] | null;
  scopes?: string[];
  rate_limits?: Partial<KeyRateLimits>;
  budgets?: Partial<KeyBudgets>;
}

export interface Refusals {
  requests: number;
  tokens: number;
  concurrency: number;
  budget: number;
}

export interface UsageMeasures {
  requests: number;
  tokens: { prompt: number; completion: number; total: number };
  cost: number;
  /** Added by a later gateway version: absent counts as 0. */
  refusals?: Partial<Refusals>;
  errors?: number;
}

export interface UsageGroup extends UsageMeasures {
  model?: string | null;
  api_key?: string | null;
}

export interface UsageBucket extends UsageMeasures {
  start_time: string;
  end_time: string;
  groups?: UsageGroup[];
}

export interface Usage extends UsageMeasures {
  start_time: string;
  end_time: string;
  granularity: 'minute' | 'hour';
  group_by?: GroupBy;
  groups?: UsageGroup[];
  bucket_width?: string;
  buckets?: UsageBucket[];
}

export type GroupBy = 'model' | 'api_key';
export type BucketWidth = '1m' | '1h' | '1d';

export interface UsageQuery {
  start_time: string;
  end_time: string;
  bucket_width: BucketWidth;
  group_by: GroupBy;
}

export interface WebhookDelivery {
  id: string;
  event_type: string;
  webhook_id: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  delivered_at: string | null;
}

export interface Webhook {
  id: string;
  url: string;
  format: 'standard' | 'slack';
  thresholds: number[];
  created_at: string;
}

/** The policy fields a project's settings form sends (null: none). */
export type PolicyPatch = Partial<RateLimits>;
