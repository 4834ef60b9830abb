/**
 * The metric recordings of one chat completion (JSON, token-limited project), timed alone:
 *
 *   taskset -c 1 npx tsx bench/micro-metrics.ts
 *
 * One "request" makes the calls the gateway makes for it (src/metrics/http-metrics.ts,
 * src/quota/admission.ts, src/quota/buffered-usage-meter.ts, src/model-call/model-call.ts and
 * chat-json-reply.ts): 8 counters and 6 histograms over 20 projects, 3 models and 4 routes. Prints the median of
 * BENCH_ROUNDS (9) rounds of BENCH_REQUESTS (200000) requests, in µs of CPU time per request.
 */
import { Metrics } from '../src/metrics/metrics.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 200_000);

const metrics = new Metrics({ defaultMetrics: false });
const projects = Array.from({ length: 20 }, (_, i) => `proj_${String(i).padStart(24, '0')}`);
const models = ['gpt-4o-mini', 'llama-3.1-70b', 'echo-1'];
const routes = ['/v1/chat/completions', '/v1/completions', '/v1/embeddings', '/v1/responses'];

function labelsOf(i: number) {
  return {
    projectId: projects[i % projects.length]!,
    model: models[i % models.length]!,
    route: routes[i % routes.length]!,
    seconds: (i % 1000) / 10_000,
  };
}

/** The counters of one request. */
function counters(i: number): void {
  const { projectId, model, route } = labelsOf(i);
  const { quota, usage, http } = metrics;
  // Admission, then settlement.
  quota.decided(projectId, true, 'store', null);
  quota.tokensReserved.inc(quota.labels(projectId), 1200);
  quota.tokensSettled.inc(quota.labels(projectId), 300);
  // The usage meter (BufferedUsageMeter.count).
  usage.requests.inc(usage.project(projectId), 1);
  usage.tokens.inc(usage.project(projectId, { gen_ai_request_model: model, type: 'prompt' }), 200);
  usage.tokens.inc(usage.project(projectId, { gen_ai_request_model: model, type: 'completion' }), 100);
  usage.cost.inc(usage.project(projectId, { gen_ai_request_model: model }), 0.0003);
  // The onResponse hook of HttpMetrics.
  http.requests.inc({ method: 'POST', route, status_code: String(200) });
}

/** The histograms of one request. */
function histograms(i: number): void {
  const { model, route, seconds } = labelsOf(i);
  const { modelTraffic: traffic, http } = metrics;
  // The model call.
  traffic.timeToFirstByte.observe({ gen_ai_request_model: model, stream: 'false' }, seconds);
  traffic.upstreamDuration.observe({ gen_ai_request_model: model, upstream: 'api.example.com', outcome: '200' }, seconds);
  traffic.tokenUsage.observe({ gen_ai_request_model: model, gen_ai_token_type: 'input' }, 200);
  traffic.tokenUsage.observe({ gen_ai_request_model: model, gen_ai_token_type: 'output' }, 100);
  traffic.operationDuration.observe({ gen_ai_request_model: model, gen_ai_operation_name: 'chat', stream: 'false', error_type: '' }, seconds);
  // The onResponse hook of HttpMetrics.
  http.duration.observe({ method: 'POST', route, status_code: String(200) }, seconds);
}

/** Median µs of CPU time per call of `part` (CPU time: a core shared with other work stretches the wall clock, not this). */
function measure(part: (i: number) => void): { median: number; min: number; max: number } {
  for (let i = 0; i < REQUESTS; i++) part(i); // warm-up
  const perRequest: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const start = process.cpuUsage();
    for (let i = 0; i < REQUESTS; i++) part(i);
    const used = process.cpuUsage(start);
    perRequest.push((used.user + used.system) / REQUESTS);
  }
  perRequest.sort((a, b) => a - b);
  return { median: perRequest[Math.floor(ROUNDS / 2)]!, min: perRequest[0]!, max: perRequest[ROUNDS - 1]! };
}

const parts = { counters, histograms, request: (i: number) => (counters(i), histograms(i)) };
for (const [name, part] of Object.entries(parts)) {
  const { median, min, max } = measure(part);
  console.log(`${name.padEnd(10)} ${median.toFixed(3)} µs a request (min ${min.toFixed(3)}, max ${max.toFixed(3)}; ${ROUNDS} rounds of ${REQUESTS})`);
}
console.log(`/metrics: ${(await metrics.registry.metrics()).length} bytes`);
