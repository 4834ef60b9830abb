/**
 * The trace work of one chat completion, timed alone (src/tracing/ and the span calls of
 * src/model-call/model-call.ts), with the export's protobuf serialization but no network:
 *
 *   taskset -c 1 npx tsx bench/micro-tracing.ts
 *
 * Per request: the server span continuing a `traceparent`, the model-call span, the attempt's
 * client span with its `traceparent` injected, their end attributes and ends; a batch processor
 * (OTEL_BSP_* defaults) hands batches to an exporter that serializes them as OTLP/protobuf
 * (BENCH_SERIALIZE below) and drops the bytes. Prints the median of BENCH_ROUNDS (9) rounds of
 * BENCH_REQUESTS (20000), in µs of CPU time per request. The machine's noise shows in the rounds:
 * compare two settings run back to back, by their lowest rounds as well as their medians.
 */
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace';
import { startTracing } from '../src/tracing/otel-tracing.js';
import { encodeSpans } from '../src/tracing/otlp-span-encoder.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 20_000);
/** BENCH_SERIALIZE: `encoder` (the gateway's, src/tracing/otlp-span-encoder.ts), `sdk` (the OTLP exporter's own) or `none`. */
const SERIALIZE = process.env.BENCH_SERIALIZE ?? 'encoder';
const serialize = { encoder: encodeSpans, sdk: (spans: ReadableSpan[]) => ProtobufTraceSerializer.serializeRequest(spans), none: () => undefined }[SERIALIZE];
if (!serialize) throw new Error('BENCH_SERIALIZE must be encoder, sdk or none');

let bytes = 0;
let spans = 0;
const exporter: SpanExporter = {
  export(batch: ReadableSpan[], done) {
    spans += batch.length;
    bytes += serialize(batch)?.length ?? 0;
    done({ code: 0 });
  },
  shutdown: async () => {},
};
const tracing = await startTracing({ protocol: 'http/protobuf', sampler: { name: 'always_on', ratio: 1 }, batch: {} }, '0.0.0', () => {}, exporter);

const headers = { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', host: '127.0.0.1:8080' };
function oneRequest(i: number): void {
  const server = tracing.startServerSpan('POST', headers);
  server.setAttributes({ 'http.request.method': 'POST', 'url.path': '/v1/chat/completions', 'client.address': '127.0.0.1' });
  const call = tracing.startChildSpan(server, 'chat bench-1', 'internal', {
    'gen_ai.operation.name': 'chat',
    'gen_ai.request.model': 'bench-1',
    'nova.model': undefined,
    'nova.stream': false,
    'nova.project.id': 'proj_000000000000000000000001',
    'nova.api_key.id': 'key_000000000000000000000001',
    'nova.admission.outcome': 'admitted',
  });
  const attempt = tracing.startChildSpan(call, 'POST', 'client', {
    'http.request.method': 'POST',
    'server.address': '127.0.0.1',
    'server.port': 9000,
    'gen_ai.request.model': 'bench-1',
    'nova.target_index': 0,
  });
  const outgoing: Record<string, string> = { 'content-type': 'application/json' };
  tracing.inject(attempt, outgoing);
  attempt.setAttributes({ 'http.response.status_code': 200 });
  attempt.end();
  call.setAttributes({
    'gen_ai.usage.input_tokens': 20 + (i % 7),
    'gen_ai.usage.output_tokens': 16,
    'gen_ai.response.model': 'bench-1',
    'gen_ai.response.finish_reasons': undefined,
    'nova.usage.reported': true,
  });
  call.end();
  server.updateName('POST /v1/chat/completions');
  server.setAttributes({ 'http.route': '/v1/chat/completions', 'http.response.status_code': 200, 'error.type': undefined });
  server.end();
}

const cpuMicros = () => {
  const { user, system } = process.cpuUsage();
  return user + system;
};
// The batch processor exports on a timer or at 512 spans, from a microtask: yield to let it run.
const tick = () => new Promise((resolve) => setImmediate(resolve));
const perRequest: number[] = [];
for (let round = 0; round < ROUNDS + 1; round++) {
  const start = cpuMicros();
  for (let i = 0; i < REQUESTS; i++) {
    oneRequest(i);
    if (i % 32 === 31) await tick();
  }
  await tick();
  if (round > 0) perRequest.push((cpuMicros() - start) / REQUESTS);
}
await tracing.shutdown();
perRequest.sort((a, b) => a - b);
console.log(
  JSON.stringify({
    us_per_request: Number(perRequest[Math.floor(perRequest.length / 2)]!.toFixed(2)),
    rounds: perRequest.map((value) => Number(value.toFixed(2))),
    spans_exported: spans,
    bytes_per_span: spans ? Math.round(bytes / spans) : null,
    serialize: SERIALIZE,
  }),
);
