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
}

interface Project {
  id: string;
  name: string;
  environment: string | null;
  created_at: string;
  rate_limits?: { requests_per_minute: number; burst_limit: number };
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

function integerFlag(flags: Flags, name: string): number | undefined {
  const raw = flags[name];
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (typeof raw !== 'string' || !Number.isInteger(value)) throw new CliError(`--${name} must be a whole number`, 2);
  return value;
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

/** The key fields of `keys create` and `keys update`, as the gateway takes them. */
function keyFields(flags: Flags) {
  const models = flags['all-models'] ? null : listFlag(flags, 'model');
  return { scopes: listFlag(flags, 'scope'), models, metadata: metadataFlag(flags) };
}

const keyLines = (key: ApiKey) =>
  [
    `API key ${key.id} (${key.name})`,
    `  key:        ${key.redacted_value}`,
    `  scopes:     ${key.scopes?.join(', ') || '-'}`,
    `  models:     ${key.models === null || key.models === undefined ? 'all' : key.models.join(', ') || '-'}`,
    `  metadata:   ${Object.entries(key.metadata ?? {}).map(([name, value]) => `${name}=${value}`).join(', ') || '-'}`,
    `  expires_at: ${key.expires_at ?? '-'}`,
  ].join('\n') + '\n';

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

const secretLines = (key: ApiKey) =>
  `secret: ${key.secret}\n  (shown this once: store it now)\n` +
  (key.previous_secret_expires_at ? `previous secret valid until ${key.previous_secret_expires_at}\n` : '');

const projectLines = (project: Project) =>
  [
    `project ${project.id}`,
    `  name:        ${project.name}`,
    `  environment: ${project.environment ?? '-'}`,
    `  created_at:  ${project.created_at}`,
    project.rate_limits ? `  rate limits: ${project.rate_limits.requests_per_minute}/min, burst ${project.rate_limits.burst_limit}` : undefined,
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
    const body = { name, ...keyFields(context.flags), expires_at: stringFlag(context.flags, 'expires-at') };
    const key =
      context.client.has('admin') || !context.client.has('project')
        ? await context.client.call<ApiKey>('admin', 'POST', `/admin/v1/projects/${encodeURIComponent(projectId)}/api-keys`, body)
        : await context.client.call<ApiKey>('project', 'POST', '/v1/api-keys', { ...body, project_id: projectId });
    show(context, key, () => `created API key ${key.id} (${key.name}) in ${projectId}\n${secretLines(key)}`);
  },

  async 'keys get'(context) {
    const keyId = arg(context, 0, 'api_key_id');
    const key = await context.client.call<ApiKey>('project', 'GET', `/v1/api-keys/${encodeURIComponent(keyId)}`);
    show(context, key, () => keyLines(key));
  },

  async 'keys update'(context) {
    const keyId = arg(context, 0, 'api_key_id');
    const expires = stringFlag(context.flags, 'expires-at');
    const body = { name: stringFlag(context.flags, 'name'), ...keyFields(context.flags), expires_at: expires === 'never' ? null : expires };
    if (Object.values(body).every((value) => value === undefined)) {
      throw new CliError('keys update needs a change: --name, --scope, --model, --all-models, --metadata or --expires-at', 2);
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
