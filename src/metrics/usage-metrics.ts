import { Counter, Gauge, type Registry } from 'prom-client';

/**
 * Usage as this replica counted it (sum over replicas for the fleet), and the state of
 * the write buffer that carries it to the store.
 */
export class UsageMetrics {
  readonly requests: Counter<string>;
  readonly tokens: Counter<string>;
  readonly tokenDetails: Counter<string>;
  readonly images: Counter<string>;
  readonly audioSeconds: Counter<string>;
  readonly cost: Counter<string>;
  readonly invalidValues: Counter<string>;
  readonly storageBytes: Gauge<string>;
  readonly buffered: Gauge;
  /** What `buffered` reports when scraped (the usage meter's buffer, see watchBuffered). */
  private readonly bufferedSource: { read: (() => number) | null } = { read: null };

  watchBuffered(read: () => number): void {
    this.bufferedSource.read = read;
  }
  readonly dropped: Counter;
  readonly flushed: Counter;
  readonly flushFailures: Counter;

  constructor(
    registry: Registry,
    private readonly projectLabel: boolean,
  ) {
    const project = projectLabel ? ['project_id'] : [];
    this.requests = new Counter({
      name: 'nova_usage_requests_total',
      help: 'Admitted /v1 requests.',
      labelNames: project,
      registers: [registry],
    });
    this.tokens = new Counter({
      name: 'nova_usage_tokens_total',
      help: 'Model tokens by type (prompt, completion) and model, as reported by the upstream.',
      labelNames: [...project, 'gen_ai_request_model', 'type'],
      registers: [registry],
    });
    // A metric of its own: its types are parts of the prompt and completion tokens, and a sum over
    // every type of nova_usage_tokens_total (the chart's per-project panel) must stay the total.
    this.tokenDetails = new Counter({
      name: 'nova_usage_token_details_total',
      help: 'Parts of the model tokens by type and model: cached_prompt and cache_write (of prompt), reasoning (of completion).',
      labelNames: [...project, 'gen_ai_request_model', 'type'],
      registers: [registry],
    });
    this.images = new Counter({
      name: 'nova_usage_image_generations_total',
      help: 'Generated images.',
      labelNames: [...project, 'gen_ai_request_model'],
      registers: [registry],
    });
    this.audioSeconds = new Counter({
      name: 'nova_usage_audio_seconds_total',
      help: 'Seconds of audio processed.',
      labelNames: [...project, 'gen_ai_request_model'],
      registers: [registry],
    });
    this.cost = new Counter({
      name: 'nova_usage_cost_dollars_total',
      help: 'Cost in dollars by model, from the pricing of the target that served each request (models[].pricing, fallbacks[].pricing).',
      labelNames: [...project, 'gen_ai_request_model'],
      registers: [registry],
    });
    this.invalidValues = new Counter({
      name: 'nova_usage_invalid_values_total',
      help: 'Usage values refused by the meter (negative, non-finite, non-integer or above the cap), by field; each counted as 0.',
      labelNames: ['field'],
      registers: [registry],
    });
    this.storageBytes = new Gauge({
      name: 'nova_usage_storage_bytes',
      help: 'Bytes the project stores (conversations, transcripts, metadata), as of the last usage write of this replica.',
      labelNames: project,
      registers: [registry],
    });
    const bufferedSource = this.bufferedSource;
    this.buffered = new Gauge({
      name: 'nova_usage_buffered_records',
      help: 'Usage records waiting in this replica to be written to the store (grows while Redis is unreachable).',
      registers: [registry],
      // Read when scraped, not set on every record.
      collect() {
        if (bufferedSource.read) this.set(bufferedSource.read());
      },
    });
    this.dropped = new Counter({
      name: 'nova_usage_dropped_records_total',
      help: 'Usage records lost because the buffer was full (usage.buffer_max_records) or the store refused them.',
      registers: [registry],
    });
    this.flushed = new Counter({
      name: 'nova_usage_flushed_records_total',
      help: 'Usage records written to the store.',
      registers: [registry],
    });
    this.flushFailures = new Counter({
      name: 'nova_usage_flush_failures_total',
      help: 'Usage writes that failed (the records stay buffered and are retried).',
      registers: [registry],
    });
  }

  /** Labels of a per-project series: only `extra` when the project label is switched off. */
  project(projectId: string, extra: Record<string, string> = {}): Record<string, string> {
    return this.projectLabel ? { project_id: projectId, ...extra } : extra;
  }
}
