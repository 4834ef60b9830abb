/**
 * The bench's OTLP/HTTP trace sink, for the `nova_traced` target (bench/run.ts): a collector that
 * keeps nothing. It answers 200 to POST /v1/traces with an empty ExportTraceServiceResponse (a
 * protobuf body of no fields, or `{}` for http/json), and counts the export requests, their bytes
 * and the spans in them, so that the run can show the gateway really exported what it traced.
 * GET /stats answers {"requests", "bytes", "spans", "undecoded", "names"} (spans by name: a
 * chat request's server span is `POST /v1/chat/completions`). It runs on the bench's core with
 * the upstream, wrk and Redis (bench/run.ts pins them), and prints {"port": n} when listening.
 *
 * Spans are counted by walking the protobuf's fields without decoding them
 * (ExportTraceServiceRequest.resource_spans = 1, ResourceSpans.scope_spans = 2, ScopeSpans.spans = 2,
 * Span.name = 5, the OTLP trace service's proto), so that the sink costs little next to the gateway
 * it measures.
 */
import { createServer } from 'node:http';
import { gunzipSync } from 'node:zlib';

const stats = { requests: 0, bytes: 0, spans: 0, undecoded: 0, names: {} as Record<string, number> };
const named = (name: string, count: number) => (stats.names[name] = (stats.names[name] ?? 0) + count);

/** Calls `field` for each field of the message in buf[start, end): its number, and where a length-delimited value lies. */
function walk(buf: Buffer, start: number, end: number, field: (number: number, from: number, to: number) => void): void {
  let at = start;
  const varint = (): number => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      if (at >= end) throw new Error('truncated varint');
      const byte = buf[at++]!;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
  };
  while (at < end) {
    const tag = varint();
    const wire = tag & 7;
    if (wire === 0) varint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      field(Math.floor(tag / 8), at, at + length);
      at += length;
    } else throw new Error(`wire type ${wire}`);
  }
  if (at !== end) throw new Error('truncated field');
}

function protobufSpans(body: Buffer): number {
  let spans = 0;
  walk(body, 0, body.length, (resourceSpans, a, b) => {
    if (resourceSpans !== 1) return;
    walk(body, a, b, (scopeSpans, c, d) => {
      if (scopeSpans !== 2) return;
      walk(body, c, d, (span, e, f) => {
        if (span !== 2) return;
        spans++;
        walk(body, e, f, (field, g, h) => {
          if (field === 5) named(body.toString('utf8', g, h), 1);
        });
      });
    });
  });
  return spans;
}

function jsonSpans(body: Buffer): number {
  const request = JSON.parse(body.toString('utf8')) as { resourceSpans?: Array<{ scopeSpans?: Array<{ spans?: Array<{ name?: string }> }> }> };
  const spans = (request.resourceSpans ?? []).flatMap((r) => (r.scopeSpans ?? []).flatMap((s) => s.spans ?? []));
  for (const span of spans) named(span.name ?? '', 1);
  return spans.length;
}

const server = createServer({ keepAliveTimeout: 60_000 }, (request, response) => {
  const parts: Buffer[] = [];
  request.on('data', (part: Buffer) => parts.push(part));
  request.on('end', () => {
    if (request.method === 'GET' && request.url === '/stats') {
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(stats));
      return;
    }
    if (request.method !== 'POST' || request.url !== '/v1/traces') {
      response.writeHead(404).end();
      return;
    }
    const raw = Buffer.concat(parts);
    stats.requests++;
    stats.bytes += raw.length;
    const json = (request.headers['content-type'] ?? '').includes('json');
    try {
      const body = request.headers['content-encoding'] === 'gzip' ? gunzipSync(raw) : raw;
      stats.spans += json ? jsonSpans(body) : protobufSpans(body);
    } catch {
      stats.undecoded++;
    }
    if (json) response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    else response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
  });
});
server.listen(0, '127.0.0.1', () => {
  const address = server.address();
  process.stdout.write(`${JSON.stringify({ port: typeof address === 'object' && address ? address.port : 0 })}\n`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
