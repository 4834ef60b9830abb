import { Pool } from 'undici';
import { ApiError, modelNotFound } from '../http/errors.js';
import type { AuthHeaderName, FallbackTargetConfig, FleetTargetConfig, ModelConfig, ModelEndpointName, UpstreamApiName } from '../config/schema.js';
import { ModelNames } from '../core/model-names.js';
import { pricingFrom, type Pricing } from '../core/pricing.js';
import { ByteToken } from '../core/json-bytes.js';
import { TargetFleet } from './target-fleet.js';
import type { FleetObserver } from '../metrics/model-traffic-metrics.js';

const DEFAULT_TIMEOUT_MS = 120_000;
const KEEP_ALIVE_MS = 30_000;
/** A health probe answers within this, or counts as down. */
const PROBE_TIMEOUT_MS = 5000;
/** `health` and `queue` when a model sets none (DESIGN.md section 10). */
const FLEET_DEFAULTS = { eject_after_failures: 5, eject_seconds: 10, max_wait_ms: 30_000, max_depth: 1000 };

/** An OpenAI-compatible backend: one keep-alive pool per origin, shared by every model that uses it. */
export interface HttpTarget {
  kind: 'http';
  /** host:port, for logs and metric labels (never credentials or paths). */
  label: string;
  pool: Pool;
  /** The base URL's path, without a trailing slash; routes are appended to it. */
  basePath: string;
  /** The base URL's query string ('' or '?…'), kept on every route. */
  search: string;
  upstreamModel: string;
  /** The header that carries the upstream key (`authorization: Bearer …` or `x-api-key`); undefined when it needs none. */
  credential: { name: 'authorization' | 'x-api-key'; value: string } | undefined;
  timeoutMs: number;
  pricing: Pricing | null;
}

export interface EchoTarget {
  kind: 'echo';
  label: 'echo';
  pricing: Pricing | null;
}

export type Target = HttpTarget | EchoTarget;

export interface RegisteredModel {
  id: string;
  /** The id as a JSON string literal, for rewriting upstream bytes. */
  idJson: ByteToken;
  ownedBy: string;
  endpoints: ModelEndpointName[];
  /** What its upstreams speak: 'anthropic' serves /v1/messages natively; 'openai' is translated to. */
  api: UpstreamApiName;
  contextWindow: number | null;
  maxOutputTokens: number | null;
  /** The primary targets first (the fleet's), then the fallbacks in order. */
  targets: Target[];
  /** Its equal targets (`upstream`, or `targets`): balanced, health-checked, capped; null for the echo provider. */
  fleet: TargetFleet<HttpTarget> | null;
  /** Sends the request's priority as vLLM's `priority` field. */
  priorityParam: boolean;
}


/** The routes of each `models[].endpoints` name, for messages that tell a client where a model is served. */
const ENDPOINT_ROUTES: Record<ModelEndpointName, string> = {
  chat: '/v1/chat/completions',
  completions: '/v1/completions',
  embeddings: '/v1/embeddings',
  responses: '/v1/responses',
  images: '/v1/images',
  audio: '/v1/audio',
  fine_tuning: '/v1/fine_tuning',
  messages: '/v1/messages',
};

/** The upstream path of a route (`/chat/completions`, `/images/generations`, …) on a target. */
export function upstreamPath(target: HttpTarget, route: string): string {
  const query = route.indexOf('?');
  if (query === -1) return `${target.basePath}${route}${target.search}`;
  const own = route.slice(query + 1);
  return `${target.basePath}${route.slice(0, query)}${target.search ? `${target.search}&${own}` : `?${own}`}`;
}

/** GETs a health probe path on the target's origin: up when it answers 2xx in time. */
async function probeTarget(target: HttpTarget, path: string): Promise<boolean> {
  const response = await target.pool.request({ method: 'GET', path, headersTimeout: PROBE_TIMEOUT_MS, bodyTimeout: PROBE_TIMEOUT_MS });
  await response.body.dump();
  return response.statusCode >= 200 && response.statusCode < 300;
}

/** The models of the config by public id, with their upstream targets resolved once at start. */
export class ModelRegistry {
  /** When the registry was built (unix seconds): the `created` of every model in OpenAI's list. */
  readonly created = Math.floor(Date.now() / 1000);
  private readonly models = new Map<string, RegisteredModel>();
  private readonly pools = new Map<string, Pool>();
  private readonly names: ModelNames;

  constructor(models: ModelConfig[], env: NodeJS.ProcessEnv = process.env, observer: FleetObserver | null = null) {
    this.names = new ModelNames(models);
    for (const model of models) {
      const targets: Target[] = [];
      const api = model.api ?? 'openai';
      let fleet: TargetFleet<HttpTarget> | null = null;
      if (model.provider === 'echo') {
        targets.push({ kind: 'echo', label: 'echo', pricing: pricingFrom(model.pricing) });
      } else {
        // A target or fallback inherits what it does not set: the upstream model name, the timeout, the
        // pricing, the key's header; the key itself only an equal target (a fallback may be another provider).
        const inherited = { upstream_model: model.upstream_model, timeout_ms: model.timeout_ms, pricing: model.pricing, auth_header: model.auth_header };
        const equal: FleetTargetConfig[] = model.targets ?? [{ upstream: model.upstream! }];
        const members = equal.map((target) => ({
          target: this.httpTarget({ id: model.id, ...inherited, api_key_env: model.api_key_env, ...target }, api, env),
          weight: target.weight ?? 1,
          maxConcurrent: target.max_concurrent ?? null,
        }));
        targets.push(...members.map(({ target }) => target));
        for (const fallback of model.fallbacks ?? []) targets.push(this.httpTarget({ id: model.id, ...inherited, ...fallback }, api, env));
        const health = { ...FLEET_DEFAULTS, ...model.health };
        const queue = { ...FLEET_DEFAULTS, ...model.queue };
        const settings = {
          balance: model.balance ?? 'least_outstanding',
          ejectAfterFailures: health.eject_after_failures,
          ejectMs: health.eject_seconds * 1000,
          probe: model.health?.probe ?? null,
          maxWaitMs: queue.max_wait_ms,
          maxDepth: queue.max_depth,
        } as const;
        fleet = new TargetFleet(model.id, members, settings, observer, probeTarget);
      }
      this.models.set(model.id, {
        id: model.id,
        idJson: ByteToken.quoted(model.id),
        ownedBy: model.owned_by ?? (model.provider === 'echo' ? 'nova-gateway' : 'organization'),
        endpoints: model.endpoints ?? ['chat'],
        api,
        contextWindow: model.context_window ?? null,
        maxOutputTokens: model.max_output_tokens ?? null,
        targets,
        fleet,
        priorityParam: model.priority_param === true,
      });
    }
  }

  get(id: string): RegisteredModel | undefined {
    return this.models.get(id);
  }

  /** The model a name a client sends stands for: a configured id or one of its aliases. */
  resolve(name: string): RegisteredModel | undefined {
    const id = this.names.resolve(name);
    return id === undefined ? undefined : this.models.get(id);
  }

  /**
   * The model a model route may use: known (by id or alias), and listing the route's endpoint in
   * the config; else a 404 that says which it is.
   */
  serving(name: string, endpoint: ModelEndpointName): RegisteredModel {
    const model = this.resolve(name);
    if (!model) throw modelNotFound();
    if (!model.endpoints.includes(endpoint)) {
      throw new ApiError(
        404,
        'not_found_error',
        'model_not_found',
        `The model "${model.id}" does not serve ${ENDPOINT_ROUTES[endpoint]}; it serves ${model.endpoints.map((name) => ENDPOINT_ROUTES[name]).join(', ')} (models[].endpoints).`,
        'model',
      );
    }
    return model;
  }

  list(): RegisteredModel[] {
    return [...this.models.values()];
  }

  /** Ends the upstream calls still open: the drain before it (src/server.ts) was their time to finish. */
  async close(): Promise<void> {
    for (const fleet of this.fleets()) fleet.close();
    await Promise.all([...this.pools.values()].map((pool) => pool.destroy().catch(() => undefined)));
  }

  private httpTarget(target: FallbackTargetConfig & { id: string }, api: UpstreamApiName, env: NodeJS.ProcessEnv): HttpTarget {
    const url = new URL(target.upstream);
    const key = target.api_key_env === undefined ? undefined : env[target.api_key_env];
    const header: AuthHeaderName = target.auth_header ?? (api === 'anthropic' ? 'x-api-key' : 'bearer');
    return {
      kind: 'http',
      label: url.host,
      pool: this.poolFor(url.origin),
      basePath: url.pathname.replace(/\/+$/, ''),
      search: url.search,
      upstreamModel: target.upstream_model ?? target.id,
      credential: !key ? undefined : header === 'bearer' ? { name: 'authorization', value: `Bearer ${key}` } : { name: 'x-api-key', value: key },
      timeoutMs: target.timeout_ms ?? DEFAULT_TIMEOUT_MS,
      pricing: pricingFrom(target.pricing),
    };
  }

  /** The models' equal targets by model id, for readiness and metrics. */
  fleets(): TargetFleet<HttpTarget>[] {
    return [...this.models.values()].flatMap((model) => (model.fleet ? [model.fleet] : []));
  }

  private poolFor(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (!pool) {
      // No connection cap: every concurrent stream needs its own connection (HTTP/1.1, no pipelining).
      pool = new Pool(origin, { pipelining: 1, keepAliveTimeout: KEEP_ALIVE_MS, connectTimeout: 10_000 });
      this.pools.set(origin, pool);
    }
    return pool;
  }
}
