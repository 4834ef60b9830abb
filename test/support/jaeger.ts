// A real Jaeger v2 for the trace tests (../shared/DESIGN.md section 12): the binary that
// scripts/jaeger-binary.mjs builds, as a child process on free loopback ports with in-memory
// storage, fed over OTLP/HTTP and read back through its HTTP query API.
//
// The query API used is the one Jaeger's own UI reads (`/api/traces?service=`, `/api/traces/<id>`):
// it needs no time range (it looks back two days by default), answers 404 for an unknown trace, and
// gives each span's attributes as a flat tag list. Its JSON is turned into JaegerTrace below, which
// hides the API's process table and tag encoding from the tests.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { jaegerBinary } from '../../scripts/jaeger-binary.mjs';
import { freePort } from '../../scripts/free-port.js';

export type AttributeValue = string | number | boolean;

export interface JaegerSpan {
  /** 32 lowercase hex digits, as in OTLP and `traceparent`. */
  traceId: string;
  /** 16 lowercase hex digits. */
  spanId: string;
  /** The span's CHILD_OF reference, undefined for a root span. */
  parentSpanId: string | undefined;
  name: string;
  /** The resource's service.name. */
  service: string;
  startTimeUs: number;
  durationUs: number;
  /**
   * The span's attributes, with what Jaeger makes of OTLP's other fields as attributes too:
   * `span.kind` ('server', 'client', ...), `otel.status_code` ('OK', 'ERROR'), `otel.status_description`,
   * `error` (true on an error status), `otel.scope.name`.
   */
  attributes: Record<string, AttributeValue>;
  /** The resource's attributes other than service.name. */
  resource: Record<string, AttributeValue>;
  /** The span's events (Jaeger's logs); an event's name is its `event` attribute. */
  events: { timeUs: number; attributes: Record<string, AttributeValue> }[];
}

export interface JaegerTrace {
  traceId: string;
  spans: JaegerSpan[];
}

export interface JaegerHarness {
  /** The OTLP/HTTP base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it: http://127.0.0.1:<port>. */
  otlpHttpEndpoint: string;
  /** `${otlpHttpEndpoint}/v1/traces`, where OTLP/HTTP JSON or protobuf is POSTed. */
  otlpTracesUrl: string;
  /** The query API and UI: http://127.0.0.1:<port>. */
  queryUrl: string;
  /** The traces Jaeger holds of a service (newest first as Jaeger gives them, at most `limit`, 100 by default). */
  traces(service: string, options?: { limit?: number }): Promise<JaegerTrace[]>;
  /** One trace, or undefined while Jaeger does not have it. */
  trace(traceId: string): Promise<JaegerTrace | undefined>;
  /** Polls trace() until the trace has at least `minSpans` spans (1 by default); ingestion is asynchronous. */
  waitForTrace(traceId: string, options?: { minSpans?: number; timeoutMs?: number }): Promise<JaegerTrace>;
  /** The last of Jaeger's own log output, for failure messages. */
  output(): string;
  /** Stops the process (SIGTERM, SIGKILL after 5 s) and removes its config directory. */
  close(): Promise<void>;
}

interface ApiTag {
  key: string;
  type: string;
  value: AttributeValue;
}
interface ApiSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references?: { refType: string; spanID: string }[];
  startTime: number;
  duration: number;
  tags?: ApiTag[];
  logs?: { timestamp: number; fields?: ApiTag[] }[];
  processID: string;
}
interface ApiTrace {
  traceID: string;
  spans: ApiSpan[];
  processes: Record<string, { serviceName: string; tags?: ApiTag[] }>;
}

const OUTPUT_KEPT = 64 * 1024;

function config(ports: { otlpHttp: number; queryHttp: number; queryGrpc: number }): string {
  // Only what the tests use listens, and only on 127.0.0.1: OTLP over HTTP (no gRPC, Jaeger or
  // Zipkin receivers), the query extension (its gRPC side cannot be turned off, so it gets a free port
  // too), no batch processor (a span is stored as soon as it is received), no internal metrics
  // server (the collector's default would take port 8888), and no traces of the query API itself
  // (on by default in v2: they would go over OTLP/gRPC to 127.0.0.1:4317, into whatever listens
  // there, and its exporter's retries would hold up SIGTERM for seconds).
  return `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:${ports.queryHttp}
    grpc:
      endpoint: 127.0.0.1:${ports.queryGrpc}
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:${ports.otlpHttp}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`;
}

function attributes(tags: ApiTag[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((tags ?? []).map((tag) => [tag.key, tag.value]));
}

/** Jaeger prints a trace id whose upper half is zero in 16 digits; OTLP's are always 32. */
function toTrace(api: ApiTrace): JaegerTrace {
  const traceId = api.traceID.padStart(32, '0');
  return {
    traceId,
    spans: api.spans.map((span) => {
      const process = api.processes[span.processID];
      const resource = attributes(process?.tags);
      return {
        traceId,
        spanId: span.spanID.padStart(16, '0'),
        parentSpanId: span.references?.find((ref) => ref.refType === 'CHILD_OF')?.spanID.padStart(16, '0'),
        name: span.operationName,
        service: process?.serviceName ?? '',
        startTimeUs: span.startTime,
        durationUs: span.duration,
        attributes: attributes(span.tags),
        resource,
        events: (span.logs ?? []).map((log) => ({ timeUs: log.timestamp, attributes: attributes(log.fields) })),
      };
    }),
  };
}

async function getJson(url: string): Promise<{ status: number; body: { data?: ApiTrace[] | null; errors?: unknown } }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  const text = await response.text();
  try {
    return { status: response.status, body: JSON.parse(text) as { data?: ApiTrace[] } };
  } catch {
    throw new Error(`Jaeger answered ${url} with ${response.status} and no JSON: ${text.slice(0, 200)}`);
  }
}

/** Whether both the query API and the OTLP receiver answer. */
async function ready(queryUrl: string, otlpTracesUrl: string): Promise<boolean> {
  try {
    const services = await fetch(`${queryUrl}/api/services`, { signal: AbortSignal.timeout(1_000) });
    await services.arrayBuffer();
    if (services.status !== 200) return false;
    const otlp = await fetch(otlpTracesUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"resourceSpans":[]}',
      signal: AbortSignal.timeout(1_000),
    });
    await otlp.arrayBuffer();
    return otlp.status === 200;
  } catch {
    return false;
  }
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
}

async function startOnce(binary: string, timeoutMs: number): Promise<JaegerHarness> {
  const ports = { otlpHttp: await freePort(), queryHttp: await freePort(), queryGrpc: await freePort() };
  const dir = mkdtempSync(join(tmpdir(), 'nova-jaeger-'));
  const configFile = join(dir, 'config.yaml');
  writeFileSync(configFile, config(ports));
  const child = spawn(binary, ['--config', configFile], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const keep = (chunk: Buffer): void => {
    output = (output + chunk.toString()).slice(-OUTPUT_KEPT);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  // A test process that dies without close() takes its Jaeger with it.
  const killOnExit = (): void => void child.kill('SIGKILL');
  process.once('exit', killOnExit);
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= (async () => {
      process.removeListener('exit', killOnExit);
      await stop(child);
      rmSync(dir, { recursive: true, force: true });
    })());

  const otlpHttpEndpoint = `http://127.0.0.1:${ports.otlpHttp}`;
  const otlpTracesUrl = `${otlpHttpEndpoint}/v1/traces`;
  const queryUrl = `http://127.0.0.1:${ports.queryHttp}`;
  const trace = async (traceId: string): Promise<JaegerTrace | undefined> => {
    const { status, body } = await getJson(`${queryUrl}/api/traces/${traceId}`);
    if (status === 404) return undefined;
    if (status !== 200) throw new Error(`Jaeger answered GET /api/traces/${traceId} with ${status}: ${JSON.stringify(body.errors)}`);
    const found = body.data?.[0];
    return found ? toTrace(found) : undefined;
  };
  const harness: JaegerHarness = {
    otlpHttpEndpoint,
    otlpTracesUrl,
    queryUrl,
    async traces(service, options = {}) {
      const query = new URLSearchParams({ service, limit: String(options.limit ?? 100) });
      const { status, body } = await getJson(`${queryUrl}/api/traces?${query}`);
      if (status !== 200) throw new Error(`Jaeger answered GET /api/traces?${query} with ${status}: ${JSON.stringify(body.errors)}`);
      return (body.data ?? []).map(toTrace);
    },
    trace,
    async waitForTrace(traceId, options = {}) {
      const { minSpans = 1, timeoutMs: waitMs = 10_000 } = options;
      const deadline = Date.now() + waitMs;
      for (;;) {
        const found = await trace(traceId);
        if (found && found.spans.length >= minSpans) return found;
        if (Date.now() > deadline) {
          throw new Error(`Jaeger had ${found?.spans.length ?? 0} span(s) of trace ${traceId} after ${waitMs} ms, not ${minSpans}`);
        }
        await sleep(100);
      }
    },
    output: () => output,
    close,
  };

  const deadline = Date.now() + timeoutMs;
  try {
    while (!(await ready(queryUrl, otlpTracesUrl))) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`Jaeger exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output.slice(-4_000)}`);
      }
      if (Date.now() > deadline) throw new Error(`Jaeger was not ready within ${timeoutMs} ms:\n${output.slice(-4_000)}`);
      await sleep(100);
    }
  } catch (error) {
    await close();
    throw error;
  }
  return harness;
}

/**
 * Starts a Jaeger v2 on free loopback ports, ready to receive OTLP/HTTP and to answer queries.
 * A start that loses a port to a parallel test (Jaeger exits) is retried on others, three times in all.
 * The binary is built first when missing (up to half an hour; .ci/run builds it before the tests).
 */
export async function startJaeger(options: { timeoutMs?: number } = {}): Promise<JaegerHarness> {
  const binary = await jaegerBinary();
  for (let attempt = 1; ; attempt++) {
    try {
      return await startOnce(binary, options.timeoutMs ?? 30_000);
    } catch (error) {
      if (attempt === 3 || !/address already in use/.test((error as Error).message)) throw error;
    }
  }
}
