import { CliError, type GatewayClient } from './gateway-client.js';
import { type Cell, renderTable } from './table.js';

export type Flags = Record<string, string | string[] | boolean | undefined>;

export interface CommandContext {
  client: GatewayClient;
  flags: Flags;
  args: string[];
  print: (text: string) => void;
}

interface ApiKey {
  id: string;
  name: string;
  redacted_value: string;
  created_at: string;
  expires_at: string | null;
  last_used_at: string | null;
  secret?: string;
  previous_secret_expires_at?: string | null;
  /** Missing from a gateway older than them. */
  models?: string[] | null;
  scopes?: string[];
  metadata?: Record<string, string>;
  rate_limits?: Record<RateLimitField, number | null>;
  budgets?: Record<BudgetField, number | null>;
  priority?: string | null;
  /** GET /v1/api-keys/{id} only: the key's budgets in the current UTC day and month. */
  usage?: { day: string; month: string; used: Record<BudgetField, number | null>; remaining: Record<BudgetField, number | null> };
}

interface Webhook {
  id: string;
  project_id: string;
  url: string;
  format: string;
  thresholds: number[];
  created_at: string;
  /** The add answer only, and only for format standard. */
  secret?: string | null;
}

interface Delivery {
  id: string;
  event_type: string;
  project_id: string;
  webhook_id: string;
  status: string;
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
  next_attempt_at: string | null;
}

interface Project {
  id: string;
  name: string;
  environment: string | null;
  created_at: string;
  rate_limits?: { requests_per_minute: number; burst_limit: number };
  priority?: string | null;
  api_key?: ApiKey;
  key_count?: number;
  [field: string]: unknown;
}

interface Page<T> {
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

interface UsageMeasures {
  start_time: string;
  end_time: string;
  requests: number;
  /** The parts (cached_prompt, …) are missing from a gateway older than them. */
  tokens: { prompt: number; completion: number; total: number; cached_prompt?: number; cache_write?: number; reasoning?: number };
  image_generations: number;
  audio_seconds: number;
  cost?: number;
}

interface Usage extends UsageMeasures {
  storage_bytes: number;
  granularity: string;
  bucket_width?: string;
  buckets?: UsageMeasures[];
}

function arg(context: CommandContext, index: number, name: string): string {
  const value = context.args[index];
  if (value === undefined || value === '') throw new CliError(`missing <${name}>`, 2);
  return value;
}

// Digits only: Number() alone would take '', ' 7', '1e3', '0x10' and '-1'.
const WHOLE = /^\d+$/;
const AMOUNT = /^\d+(\.\d+)?$/;

function integerFlag(flags: Flags, name: string): number | undefined {
  const raw = flags[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !WHOLE.test(raw)) throw new CliError(`--${name} must be a whole number of 0 or more (got ${JSON.stringify(raw)})`, 2);
  return Number(raw);
}

function stringFlag(flags: Flags, name: string): string | undefined {
  const raw = flags[name];
  return typeof raw === 'string' ? raw : undefined;
}

/**
 * The bucket widths the usage endpoint accepts (its bucket_width, in
 * src/routes/management/usage-schemas.ts): checked here, since the gateway's 400 for
 * another names neither the option nor the allowed values.
 */
export const USAGE_BUCKET_WIDTHS = ['1m', '1h', '1d'] as const;

/** What the admin webhook routes take (src/routes/admin/admin-webhooks.ts): checked here to name the flag. */
export const WEBHOOK_FORMATS = ['standard', 'slack'] as const;
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed'] as const;
/** A key's or project's queue priority (PrioritySchema in src/routes/management/api-key-view.ts). */
export const PRIORITIES = ['high', 'normal', 'low'] as const;

/** --priority high|normal|low; with `clearable`, `none` is null: a key follows its project, a project is normal. */
function priorityFlag(flags: Flags, clearable: boolean): string | null | undefined {
  if (clearable && flags.priority === 'none') return null;
  return choiceFlag(flags, 'priority', clearable ? [...PRIORITIES, 'none'] : PRIORITIES);
}

function choiceFlag<T extends string>(flags: Flags, name: string, allowed: readonly T[]): T | undefined {
  const raw = flags[name];
  if (raw === undefined) return undefined;
  if (typeof raw !== 'string' || !(allowed as readonly string[]).includes(raw)) {
    throw new CliError(`--${name} must be one of ${allowed.join(', ')} (got ${JSON.stringify(raw)})`, 2);
  }
  return raw as T;
}

/** A repeatable flag (--scope a --scope b); undefined when not given. */
function listFlag(flags: Flags, name: string): string[] | undefined {
  const raw = flags[name];
  if (raw === undefined) return undefined;
  return (Array.isArray(raw) ? raw : [String(raw)]).flatMap((value) => value.split(',')).filter((value) => value !== '');
}

/** --metadata owner=ana --metadata team=search: a map; a value without `=` is wrong usage. */
function metadataFlag(flags: Flags): Record<string, string> | undefined {
  const entries = listFlag(flags, 'metadata');
  if (entries === undefined) return undefined;
  return Object.fromEntries(
    entries.map((entry) => {
      const at = entry.indexOf('=');
      if (at < 1) throw new CliError(`--metadata takes key=value (got ${JSON.stringify(entry)})`, 2);
      return [entry.slice(0, at), entry.slice(at + 1)];
    }),
  );
}

type RateLimitField = 'requests_per_minute' | 'burst_limit' | 'tokens_per_minute' | 'max_concurrent_requests';
type BudgetField = 'daily_tokens' | 'monthly_tokens' | 'monthly_cost';

/**
 * A key's own limits as flags, each with its place in the body of POST /v1/api-keys, PATCH
 * /v1/api-keys/{id} and the admin's key create (KeyRateLimits and KeyBudgets in
 * src/routes/management/api-key-view.ts).
 */
const RATE_LIMIT_FLAGS: Record<string, RateLimitField> = {
  'requests-per-minute': 'requests_per_minute',
  'burst-limit': 'burst_limit',
  'tokens-per-minute': 'tokens_per_minute',
  'max-concurrent-requests': 'max_concurrent_requests',
};
const BUDGET_FLAGS: Record<string, BudgetField> = { 'daily-tokens': 'daily_tokens', 'monthly-tokens': 'monthly_tokens', 'monthly-cost': 'monthly_cost' };
export const KEY_LIMIT_FLAGS = [...Object.keys(RATE_LIMIT_FLAGS), ...Object.keys(BUDGET_FLAGS)];

/**
 * One limit flag: a whole number (monthly_cost: dollars, cents allowed), or with `clearable`
 * `none`, which PATCH takes as null: no limit of the key's own (its project's still applies).
 * The gateway checks the upper bounds and a key's own minimums and names the field.
 */
function limitFlag(flags: Flags, name: string, clearable: boolean): number | null | undefined {
  const raw = flags[name];
  if (raw === undefined) return undefined;
  if (clearable && raw === 'none') return null;
  const pattern = name === 'monthly-cost' ? AMOUNT : WHOLE;
  if (typeof raw === 'string' && pattern.test(raw)) return Number(raw);
  const what = name === 'monthly-cost' ? 'an amount of dollars of 0 or more' : 'a whole number of 0 or more';
  throw new CliError(`--${name} must be ${what}${clearable ? ', or none to remove it' : ''} (got ${JSON.stringify(raw)})`, 2);
}

/** The limit flags given, nested as the gateway takes them; a group with none given is left out. */
function limitGroup<Field extends string>(flags: Flags, names: Record<string, Field>, clearable: boolean) {
  const group: Partial<Record<Field, number | null>> = {};
  for (const [name, field] of Object.entries(names)) {
    const value = limitFlag(flags, name, clearable);
    if (value !== undefined) group[field] = value;
  }
  return Object.keys(group).length > 0 ? group : undefined;
}

/** The key fields of `keys create` and `keys update` (where `none` clears a limit), as the gateway takes them. */
function keyFields(flags: Flags, clearable: boolean) {
  const models = flags['all-models'] ? null : listFlag(flags, 'model');
  return {
    scopes: listFlag(flags, 'scope'),
    models,
    metadata: metadataFlag(flags),
    rate_limits: limitGroup(flags, RATE_LIMIT_FLAGS, clearable),
    budgets: limitGroup(flags, BUDGET_FLAGS, clearable),
    priority: priorityFlag(flags, clearable),
  };
}

/** `requests_per_minute=60, burst_limit=10`: the limits a key has; `none` when it has none of its own. */
const limitsLine = (limits: Record<string, number | null> | undefined) =>
  limits === undefined
    ? '-'
    : Object.entries(limits)
        .filter(([, value]) => value !== null)
        .map(([field, value]) => `${field}=${value}`)
        .join(', ') || 'none';

const keyLines = (key: ApiKey) =>
  [
    `API key ${key.id} (${key.name})`,
    `  key:        ${key.redacted_value}`,
    `  scopes:     ${key.scopes?.join(', ') || '-'}`,
    `  models:     ${key.models === null || key.models === undefined ? 'all' : key.models.join(', ') || '-'}`,
    `  metadata:   ${Object.entries(key.metadata ?? {}).map(([name, value]) => `${name}=${value}`).join(', ') || '-'}`,
    `  expires_at: ${key.expires_at ?? '-'}`,
    `  limits:     ${limitsLine(key.rate_limits)}`,
    `  budgets:    ${limitsLine(key.budgets)}`,
    `  priority:   ${key.priority ?? "the project's"}`,
  ].join('\n') + '\n';

/** What GET /v1/api-keys/{id} adds: each budget's limit, use and what is left in the current UTC periods. */
function budgetUsageLines(key: ApiKey): string {
  const { usage, budgets } = key;
  if (!usage || !budgets) return '';
  const fields = Object.keys(BUDGET_FLAGS).map((name) => BUDGET_FLAGS[name]!);
  const rows = fields.map((field): Cell[] => [field, budgets[field], usage.used[field], usage.remaining[field]]);
  return `budgets in the current UTC periods (day ${usage.day}, month ${usage.month}):\n${renderTable(['budget', 'limit', 'used', 'remaining'], rows)}`;
}

function query(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) search.set(name, String(value));
  const text = search.toString();
  return text ? `?${text}` : '';
}

/** Prints the reply as JSON (--json) or as the given lines. */
function show(context: CommandContext, reply: unknown, human: () => string): void {
  context.print(context.flags.json ? `${JSON.stringify(reply, null, 2)}\n` : human());
}

const shownOnce = (secret: string | null | undefined) => `secret: ${secret}\n  (shown this once: store it now)\n`;

const secretLines = (key: ApiKey) =>
  shownOnce(key.secret) + (key.previous_secret_expires_at ? `previous secret valid until ${key.previous_secret_expires_at}\n` : '');

const projectLines = (project: Project) =>
  [
    `project ${project.id}`,
    `  name:        ${project.name}`,
    `  environment: ${project.environment ?? '-'}`,
    `  created_at:  ${project.created_at}`,
    project.rate_limits ? `  rate limits: ${project.rate_limits.requests_per_minute}/min, burst ${project.rate_limits.burst_limit}` : undefined,
    project.priority !== undefined ? `  priority:    ${project.priority ?? 'normal (default)'}` : undefined,
    project.key_count !== undefined ? `  keys:        ${project.key_count}` : undefined,
  ]
    .filter((line) => line !== undefined)
    .join('\n') + '\n';

const keyTable = (keys: ApiKey[]) =>
  renderTable(
    ['id', 'name', 'key', 'created_at', 'expires_at', 'last_used_at'],
    keys.map((key) => [key.id, key.name, key.redacted_value, key.created_at, key.expires_at, key.last_used_at]),
  );

const isEmpty = (u: UsageMeasures) =>
  u.requests === 0 && u.tokens.total === 0 && u.image_generations === 0 && u.audio_seconds === 0 && (u.cost ?? 0) === 0;

/**
 * The buckets as table rows, each run of two or more empty ones folded into one line that
 * says how many and which: a day of 1m buckets is 1,440 rows, mostly zeros.
 */
function foldEmpty(buckets: UsageMeasures[], width: string, row: (start: string, u: UsageMeasures) => Cell[]): (Cell[] | string)[] {
  const rows: (Cell[] | string)[] = [];
  for (let i = 0; i < buckets.length; ) {
    let end = i;
    while (end < buckets.length && isEmpty(buckets[end]!)) end++;
    if (end - i >= 2) {
      const count = (end - i).toLocaleString('en-US');
      rows.push(`… ${count} empty ${width} buckets from ${buckets[i]!.start_time} to ${buckets[end - 1]!.end_time} …`);
      i = end;
    } else {
      rows.push(row(buckets[i]!.start_time, buckets[i]!));
      i++;
    }
  }
  return rows;
}

export const commands: Record<string, (context: CommandContext) => Promise<void>> = {
  async 'projects create'(context) {
    const { flags } = context;
    const body = {
      name: arg(context, 0, 'name'),
      environment: stringFlag(flags, 'environment'),
      requests_per_minute: integerFlag(flags, 'requests-per-minute'),
      burst_limit: integerFlag(flags, 'burst-limit'),
      priority: priorityFlag(flags, false),
    };
    const project = await context.client.call<Project>('admin', 'POST', '/admin/v1/projects', body);
    show(context, project, () => `${projectLines(project)}first API key ${project.api_key!.id} (default)\n${secretLines(project.api_key!)}`);
  },

  async 'projects list'(context) {
    const limit = integerFlag(context.flags, 'limit');
    const page = await context.client.call<Page<Project>>(
      'admin',
      'GET',
      `/admin/v1/projects${query({ limit, cursor: stringFlag(context.flags, 'cursor') })}`,
    );
    show(context, page, () => {
      const table = renderTable(
        ['id', 'name', 'environment', 'created_at', 'rpm', 'burst', 'keys'],
        page.data.map((p) => [p.id, p.name, p.environment, p.created_at, p.rate_limits?.requests_per_minute, p.rate_limits?.burst_limit, p.key_count]),
      );
      return page.has_more ? `${table}more: --cursor ${page.next_cursor}\n` : table;
    });
  },

  async 'projects get'(context) {
    const id = arg(context, 0, 'project_id');
    const project = await context.client.call<Project>('admin', 'GET', `/admin/v1/projects/${encodeURIComponent(id)}`);
    show(context, project, () => projectLines(project));
  },

  // The admin's project settings (PATCH /admin/v1/projects/{id}): its queue priority.
  async 'projects update'(context) {
    const id = arg(context, 0, 'project_id');
    const priority = priorityFlag(context.flags, true);
    if (priority === undefined) throw new CliError('projects update needs a change: --priority', 2);
    const project = await context.client.call<Project>('admin', 'PATCH', `/admin/v1/projects/${encodeURIComponent(id)}`, { priority });
    show(context, project, () => `updated ${projectLines(project)}`);
  },

  async 'projects delete'(context) {
    const id = arg(context, 0, 'project_id');
    if (!context.flags.yes) throw new CliError(`deleting ${id} removes its keys and data: add --yes to confirm`, 2);
    const reply = await context.client.call<Project>('admin', 'DELETE', `/admin/v1/projects/${encodeURIComponent(id)}`);
    show(context, reply, () => `deleted project ${id}\n`);
  },

  // With the admin token through the admin API; with only the project's key through its own route,
  // where the new key gets the creating key's scopes and models unless told (docs/api.md).
  async 'keys create'(context) {
    const projectId = arg(context, 0, 'project_id');
    const name = arg(context, 1, 'name');
    const body = { name, ...keyFields(context.flags, false), expires_at: stringFlag(context.flags, 'expires-at') };
    const key =
      context.client.has('admin') || !context.client.has('project')
        ? await context.client.call<ApiKey>('admin', 'POST', `/admin/v1/projects/${encodeURIComponent(projectId)}/api-keys`, body)
        : await context.client.call<ApiKey>('project', 'POST', '/v1/api-keys', { ...body, project_id: projectId });
    show(context, key, () => `created API key ${key.id} (${key.name}) in ${projectId}\n${secretLines(key)}`);
  },

  async 'keys get'(context) {
    const keyId = arg(context, 0, 'api_key_id');
    const key = await context.client.call<ApiKey>('project', 'GET', `/v1/api-keys/${encodeURIComponent(keyId)}`);
    show(context, key, () => keyLines(key) + budgetUsageLines(key));
  },

  async 'keys update'(context) {
    const keyId = arg(context, 0, 'api_key_id');
    const expires = stringFlag(context.flags, 'expires-at');
    const body = { name: stringFlag(context.flags, 'name'), ...keyFields(context.flags, true), expires_at: expires === 'never' ? null : expires };
    if (Object.values(body).every((value) => value === undefined)) {
      const limits = KEY_LIMIT_FLAGS.map((name) => `--${name}`).join(', ');
      throw new CliError(`keys update needs a change: --name, --scope, --model, --all-models, --metadata, --expires-at, --priority, ${limits}`, 2);
    }
    const key = await context.client.call<ApiKey>('project', 'PATCH', `/v1/api-keys/${encodeURIComponent(keyId)}`, body);
    show(context, key, () => `updated ${keyLines(key)}`);
  },

  async 'keys list'(context) {
    const projectId = arg(context, 0, 'project_id');
    const limit = integerFlag(context.flags, 'limit');
    const page = await context.client.call<Page<ApiKey>>(
      'project',
      'GET',
      `/v1/api-keys${query({ project_id: projectId, limit, cursor: stringFlag(context.flags, 'cursor') })}`,
    );
    show(context, page, () => (page.has_more ? `${keyTable(page.data)}more: --cursor ${page.next_cursor}\n` : keyTable(page.data)));
  },

  async 'keys rotate'(context) {
    const keyId = arg(context, 0, 'api_key_id');
    const body = { grace_period_seconds: integerFlag(context.flags, 'grace-period'), reason: stringFlag(context.flags, 'reason') };
    const key = await context.client.call<ApiKey>('project', 'PUT', `/v1/api-keys/${encodeURIComponent(keyId)}`, body);
    show(context, key, () => `rotated API key ${key.id} (${key.name})\n${secretLines(key)}`);
  },

  async 'keys revoke'(context) {
    const keyId = arg(context, 0, 'api_key_id');
    const key = await context.client.call<ApiKey & { revoked_at: string }>('project', 'DELETE', `/v1/api-keys/${encodeURIComponent(keyId)}`);
    show(context, key, () => `revoked API key ${key.id} (${key.name}) at ${key.revoked_at}\n`);
  },

  async 'policy set'(context) {
    const projectId = arg(context, 0, 'project_id');
    const body = {
      requests_per_minute: integerFlag(context.flags, 'requests-per-minute'),
      burst_limit: integerFlag(context.flags, 'burst-limit'),
    };
    if (body.requests_per_minute === undefined && body.burst_limit === undefined) {
      throw new CliError('policy set needs --requests-per-minute and/or --burst-limit', 2);
    }
    const policy = await context.client.call<{ requests_per_minute: number; burst_limit: number }>(
      'project',
      'PATCH',
      `/v1/projects/${encodeURIComponent(projectId)}/rate-limits`,
      body,
    );
    show(context, policy, () => `rate limits of ${projectId}: ${policy.requests_per_minute}/min, burst ${policy.burst_limit}\n`);
  },

  async 'webhooks list'(context) {
    const projectId = arg(context, 0, 'project_id');
    const reply = await context.client.call<{ data: Webhook[] }>('admin', 'GET', `/admin/v1/projects/${encodeURIComponent(projectId)}/webhooks`);
    show(context, reply, () =>
      renderTable(
        ['id', 'format', 'url', 'thresholds', 'created_at'],
        reply.data.map((hook) => [hook.id, hook.format, hook.url, hook.thresholds.join(', '), hook.created_at]),
      ),
    );
  },

  // The webhook URL is positional: --url is the gateway's own.
  async 'webhooks add'(context) {
    const projectId = arg(context, 0, 'project_id');
    const body = {
      url: arg(context, 1, 'url'),
      format: choiceFlag(context.flags, 'format', WEBHOOK_FORMATS),
      thresholds: listFlag(context.flags, 'threshold')?.map((raw) => {
        if (!AMOUNT.test(raw) || Number(raw) === 0) throw new CliError(`--threshold must be a fraction of the budget above 0, such as 0.8 (got ${JSON.stringify(raw)})`, 2);
        return Number(raw);
      }),
    };
    const hook = await context.client.call<Webhook>('admin', 'POST', `/admin/v1/projects/${encodeURIComponent(projectId)}/webhooks`, body);
    show(context, hook, () => {
      const added = `added webhook ${hook.id} to ${projectId} (${hook.format}, thresholds ${hook.thresholds.join(', ')})\n`;
      // A standard webhook's signing secret, shown in this answer only; a Slack URL is its own credential.
      return hook.secret ? `${added}${shownOnce(hook.secret)}` : added;
    });
  },

  async 'webhooks remove'(context) {
    const projectId = arg(context, 0, 'project_id');
    const webhookId = arg(context, 1, 'webhook_id');
    const reply = await context.client.call<{ id: string }>(
      'admin',
      'DELETE',
      `/admin/v1/projects/${encodeURIComponent(projectId)}/webhooks/${encodeURIComponent(webhookId)}`,
    );
    show(context, reply, () => `removed webhook ${webhookId} from ${projectId}\n`);
  },

  async 'webhooks deliveries'(context) {
    const params = {
      project_id: context.args[0],
      status: choiceFlag(context.flags, 'status', DELIVERY_STATUSES),
      limit: integerFlag(context.flags, 'limit'),
    };
    const reply = await context.client.call<{ data: Delivery[] }>('admin', 'GET', `/admin/v1/webhook-deliveries${query(params)}`);
    show(context, reply, () =>
      renderTable(
        ['id', 'event_type', 'project_id', 'webhook_id', 'status', 'attempts', 'last_status', 'created_at', 'next_attempt_at', 'last_error'],
        reply.data.map((d) => [d.id, d.event_type, d.project_id, d.webhook_id, d.status, d.attempts, d.last_status_code, d.created_at, d.next_attempt_at, d.last_error]),
      ),
    );
  },

  async usage(context) {
    const projectId = arg(context, 0, 'project_id');
    const params = {
      start_time: stringFlag(context.flags, 'start-time'),
      end_time: stringFlag(context.flags, 'end-time'),
      bucket_width: choiceFlag(context.flags, 'bucket-width', USAGE_BUCKET_WIDTHS),
    };
    const usage = await context.client.call<Usage>('project', 'GET', `/v1/projects/${encodeURIComponent(projectId)}/usage${query(params)}`);
    show(context, usage, () => {
      // bucket_width is the width of the rows; granularity only the resolution the gateway kept the window at.
      const shape = usage.bucket_width ? `${usage.bucket_width} buckets; ` : 'total; ';
      const header = `usage of ${projectId} from ${usage.start_time} to ${usage.end_time} (${shape}stored per ${usage.granularity})\n`;
      const columns = ['start', 'requests', 'prompt tokens', 'completion tokens', 'total tokens', 'cached prompt', 'cache write', 'reasoning', 'images', 'audio s'];
      const row = (start: string, u: UsageMeasures): Cell[] => [
        start,
        u.requests,
        u.tokens.prompt,
        u.tokens.completion,
        u.tokens.total,
        u.tokens.cached_prompt ?? 0,
        u.tokens.cache_write ?? 0,
        u.tokens.reasoning ?? 0,
        u.image_generations,
        u.audio_seconds,
      ];
      const rows = foldEmpty(usage.buckets ?? [], usage.bucket_width ?? '', row);
      rows.push(row('total', usage));
      return `${header}${renderTable(columns, rows)}storage: ${usage.storage_bytes} bytes\n`;
    });
  },
};
