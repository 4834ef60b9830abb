import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
// OpenTelemetry GenAI semantic conventions: the advised buckets of gen_ai.client.token.usage.
const TOKENS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304];

/**
 * Model traffic: chat completions through the registry. Names follow the OpenTelemetry GenAI
 * conventions where one exists (dots become underscores); labels are model ids, target hosts,
 * and outcomes, never keys or paths.
 */
export class ModelTrafficMetrics {
  readonly tokenUsage: Histogram<'gen_ai_request_model' | 'gen_ai_token_type'>;
  readonly timeToFirstToken: Histogram<'gen_ai_request_model'>;
  readonly operationDuration: Histogram<'gen_ai_request_model' | 'gen_ai_operation_name' | 'stream' | 'error_type'>;
  readonly timeToFirstByte: Histogram<'gen_ai_request_model' | 'stream'>;
  readonly upstreamDuration: Histogram<'gen_ai_request_model' | 'upstream' | 'outcome'>;
  readonly fallbacks: Counter<'gen_ai_request_model' | 'from_upstream'>;
  readonly activeStreams: Gauge;
  /** Background Responses the gateway followed up, by how each was charged (src/model-call/background-response.ts). */
  readonly backgroundResponses: Counter<'gen_ai_request_model' | 'outcome'>;
  /** Requests whose usage could not be charged and that were charged their reservation, by why. */
  readonly chargedAsReserved: Counter<'gen_ai_request_model' | 'reason'>;
  /** Model fleets (src/model-call/target-fleet.ts): queue depth and wait, requests in flight per target, ejections. */
  readonly queueDepth: Gauge<'gen_ai_request_model'>;
  readonly queueWait: Histogram<'gen_ai_request_model'>;
  readonly targetInFlight: Gauge<'gen_ai_request_model' | 'upstream'>;
  readonly ejections: Counter<'gen_ai_request_model' | 'upstream'>;

  constructor(registry: Registry) {
    this.tokenUsage = new Histogram({
      name: 'gen_ai_client_token_usage',
      help: 'Tokens per chat completion by model and type (input, output): the upstream report, or the reservation when it reported none.',
      labelNames: ['gen_ai_request_model', 'gen_ai_token_type'],
      buckets: TOKENS,
      registers: [registry],
    });
    this.timeToFirstToken = new Histogram({
      name: 'gen_ai_server_time_to_first_token_seconds',
      help: 'Time from request received to the first content chunk forwarded to the client (streams).',
      labelNames: ['gen_ai_request_model'],
      buckets: SECONDS,
      registers: [registry],
    });
    this.operationDuration = new Histogram({
      name: 'gen_ai_client_operation_duration_seconds',
      help: 'Duration of chat completions through the gateway, request received to last byte sent.',
      labelNames: ['gen_ai_request_model', 'gen_ai_operation_name', 'stream', 'error_type'],
      buckets: SECONDS,
      registers: [registry],
    });
    this.timeToFirstByte = new Histogram({
      name: 'nova_time_to_first_byte_seconds',
      help: 'Time from request received to the first response body byte sent, by model and streaming.',
      labelNames: ['gen_ai_request_model', 'stream'],
      buckets: SECONDS,
      registers: [registry],
    });
    this.upstreamDuration = new Histogram({
      name: 'nova_upstream_request_duration_seconds',
      help: 'Duration of requests to upstream targets (until the whole body was read), by model, target host and outcome (HTTP status or error code).',
      labelNames: ['gen_ai_request_model', 'upstream', 'outcome'],
      buckets: SECONDS,
      registers: [registry],
    });
    this.chargedAsReserved = new Counter({
      name: 'nova_charged_as_reserved_total',
      help: 'Model requests charged their whole reservation because their usage could not be: the client left (client_closed), the upstream reported none (usage_missing) or reported counts that are not whole non-negative numbers (usage_invalid).',
      labelNames: ['gen_ai_request_model', 'reason'],
      registers: [registry],
    });
    this.fallbacks = new Counter({
      name: 'nova_upstream_fallbacks_total',
      help: 'Times a failed upstream target was followed by the next target of the model.',
      labelNames: ['gen_ai_request_model', 'from_upstream'],
      registers: [registry],
    });
    this.backgroundResponses = new Counter({
      name: 'nova_background_responses_total',
      help: 'Background Responses followed up until they ended, by outcome: usage (charged their usage), and charged their reservation: no_usage (ended without valid usage), bound (responses.background_max_ms passed), gone (the upstream no longer has it), shutdown (the gateway stopped), client_closed (the client left before the reply).',
      labelNames: ['gen_ai_request_model', 'outcome'],
      registers: [registry],
    });
    this.activeStreams = new Gauge({
      name: 'nova_chat_streams_active',
      help: 'Streaming chat completions in progress.',
      registers: [registry],
    });
    this.queueDepth = new Gauge({
      name: 'nova_model_queue_depth',
      help: "Requests waiting on this replica for room at one of the model's targets (every target at max_concurrent).",
      labelNames: ['gen_ai_request_model'],
      registers: [registry],
    });
    this.queueWait = new Histogram({
      name: 'nova_model_queue_wait_seconds',
      help: 'Time a request waited in the model queue before a target took it (requests that left or were refused not included).',
      labelNames: ['gen_ai_request_model'],
      buckets: SECONDS,
      registers: [registry],
    });
    this.targetInFlight = new Gauge({
      name: 'nova_upstream_in_flight',
      help: "Requests in flight from this replica to each of a model's targets, by target host.",
      labelNames: ['gen_ai_request_model', 'upstream'],
      registers: [registry],
    });
    this.ejections = new Counter({
      name: 'nova_upstream_ejections_total',
      help: 'Times a target was taken out of service after eject_after_failures failures in a row (connection errors, timeouts, 5xx).',
      labelNames: ['gen_ai_request_model', 'upstream'],
      registers: [registry],
    });
  }

  /** What a model fleet reports, as these metrics: each series' child is looked up once, at start. */
  get fleetObserver(): FleetObserver {
    return {
      queueDepth: (model) => {
        const series = this.queueDepth.labels({ gen_ai_request_model: model });
        return (depth) => series.set(depth);
      },
      queueWait: (model) => {
        const series = this.queueWait.labels({ gen_ai_request_model: model });
        return (seconds) => series.observe(seconds);
      },
      inFlight: (model, upstream) => {
        const series = this.targetInFlight.labels({ gen_ai_request_model: model, upstream });
        return (count) => series.set(count);
      },
      ejected: (model, upstream) => this.ejections.inc({ gen_ai_request_model: model, upstream }),
    };
  }
}

/**
 * What a model fleet tells the metrics: bounded labels only (model ids and target hosts from the
 * config). The first three give the setter of one series, taken once per model or target.
 */
export interface FleetObserver {
  queueDepth(model: string): (depth: number) => void;
  queueWait(model: string): (seconds: number) => void;
  inFlight(model: string, upstream: string): (count: number) => void;
  ejected(model: string, upstream: string): void;
}
