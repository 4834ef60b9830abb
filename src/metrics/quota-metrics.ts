import { Counter, Gauge, type Registry } from 'prom-client';
import { limitKindOf, type LimitKind, type RefusedBy } from '../store/quota-types.js';

/** Admission decisions, refusals and the Redis trouble behind fallbacks. */
export class QuotaMetrics {
  readonly decisions: Counter<'result' | 'source'>;
  readonly refusals: Counter<string>;
  readonly fallbackActive: Gauge;
  readonly storeErrors: Counter<'operation'>;
  readonly tokensReserved: Counter<string>;
  readonly tokensSettled: Counter<string>;
  readonly inFlight: Gauge<string>;
  private readonly inFlightByProject = new Map<string, number>();
  readonly budgetsStoreDown: Counter<'decision'>;

  constructor(
    registry: Registry,
    private readonly projectLabel: boolean,
  ) {
    this.decisions = new Counter({
      name: 'nova_rate_limit_decisions_total',
      help: 'Admission decisions of model routes by result (admitted, refused) and source (store: the shared limiter; fallback: the per-replica limiter used while Redis is unreachable).',
      labelNames: ['result', 'source'],
      registers: [registry],
    });
    this.refusals = new Counter({
      name: 'nova_rate_limit_refusals_total',
      help: 'Requests refused with 429, by the limit that refused them (requests, tokens, concurrency, budget, management).',
      labelNames: projectLabel ? ['limit', 'project_id'] : ['limit'],
      registers: [registry],
    });
    this.fallbackActive = new Gauge({
      name: 'nova_rate_limit_fallback_active',
      help: '1 while admission uses the per-replica fallback limiter because Redis is unreachable, else 0.',
      registers: [registry],
    });
    this.storeErrors = new Counter({
      name: 'nova_redis_errors_total',
      help: 'Store (Redis) operations that failed or timed out, by operation (admission, settlement, lease_renewal, usage_flush, request).',
      labelNames: ['operation'],
      registers: [registry],
    });
    const projectLabels = projectLabel ? ['project_id'] : [];
    this.tokensReserved = new Counter({
      name: 'nova_quota_tokens_reserved_total',
      help: 'Tokens reserved at admission by model requests charged to a token rate or budget (prompt estimate + max output).',
      labelNames: projectLabels,
      registers: [registry],
    });
    this.tokensSettled = new Counter({
      name: 'nova_quota_tokens_settled_total',
      help: 'Tokens those requests really used, charged when they ended (compare with nova_quota_tokens_reserved_total).',
      labelNames: projectLabels,
      registers: [registry],
    });
    const inFlightByProject = this.inFlightByProject;
    this.inFlight = new Gauge({
      name: 'nova_quota_requests_in_flight',
      help: 'Admitted model requests in flight on this replica.',
      labelNames: projectLabels,
      registers: [registry],
      // Counted in a plain map per request, read when scraped; a project back at 0 is reported
      // once more and forgotten, so the map holds only projects with requests in flight.
      collect() {
        for (const [label, count] of inFlightByProject) {
          this.set(projectLabel ? { project_id: label } : {}, count);
          if (count === 0) inFlightByProject.delete(label);
        }
      },
    });
    this.budgetsStoreDown = new Counter({
      name: 'nova_quota_budget_store_down_decisions_total',
      help: 'Model requests of projects with a budget decided while Redis was unreachable: admitted unchecked (open) or refused (closed), per rate_limits.budgets_when_store_down.',
      labelNames: ['decision'],
      registers: [registry],
    });
  }

  decided(projectId: string, admitted: boolean, source: 'store' | 'fallback', refusedBy: RefusedBy | null): void {
    this.decisions.inc({ result: admitted ? 'admitted' : 'refused', source });
    if (!admitted) this.refused(projectId, limitKindOf(refusedBy ?? 'requests'));
  }

  refused(projectId: string, limit: LimitKind): void {
    this.refusals.inc(this.projectLabel ? { limit, project_id: projectId } : { limit });
  }

  /** An admitted model request started (true) or ended (false) on this replica. */
  requestInFlight(projectId: string, started: boolean): void {
    const key = this.projectLabel ? projectId : '';
    this.inFlightByProject.set(key, (this.inFlightByProject.get(key) ?? 0) + (started ? 1 : -1));
  }

  labels(projectId: string): Record<string, string> {
    return this.projectLabel ? { project_id: projectId } : {};
  }
}
