/**
 * Many slow streams held open through one gateway at once: its peak RSS while they are open, and
 * the time to first byte of new streams meanwhile, through the gateway and to the upstream directly
 * (probes alternate, one at a time, so both see the same load). Also the memory each held request
 * adds (RSS, and V8's heap from the gateway's /metrics), and the same through a model that queues
 * most of them (`queued`).
 */
import { setMaxListeners } from 'node:events';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';

export interface HeldStreamsOptions {
  /** The gateway's held-stream URL and headers, and the model the held requests name. */
  held: { url: string; headers: Record<string, string>; model: string };
  /** The gateway's Prometheus listener: its heap (prom-client's default metrics) and the model's queue depth. */
  metricsUrl: string;
  /**
   * The model queues (every target at `max_concurrent`): the requests are held once each has either
   * its first byte or a place in the queue (`nova_model_queue_depth`), measured, then abandoned by
   * their clients (which takes them out of the queue at once) instead of waited for.
   */
  queued?: boolean;
  /** Streams that answer at once, through the gateway and directly, for the probes. */
  probe: { gateway: { url: string; headers: Record<string, string> }; direct: { url: string } };
  pid: number;
  streams: number;
  probes: number;
}

export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

/** A gauge in the gateway's /metrics: the sum of its lines whose name and labels start with `prefix`. */
async function gauge(metricsUrl: string, prefix: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  return text
    .split('\n')
    .filter((line) => line.startsWith(prefix))
    .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
}
const heapUsedMb = async (metricsUrl: string) => (await gauge(metricsUrl, 'nodejs_heap_size_used_bytes ')) / 2 ** 20;

export const percentile = (values: number[], p: number): number => {
  const sorted = [...values].sort((x, y) => x - y);
  return Number((sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0).toFixed(3));
};

const streamBody = (model: string) =>
  JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello, benchmark!' }], stream: true, max_tokens: 16 });

async function timeToFirstByte(dispatcher: Agent, url: string, headers: Record<string, string>, model: string): Promise<number> {
  const started = performance.now();
  const response = await request(url, {
    method: 'POST',
    dispatcher,
    headers: { 'content-type': 'application/json', ...headers },
    body: streamBody(model),
  });
  let first = 0;
  for await (const _chunk of response.body) if (!first) first = performance.now() - started;
  if (response.statusCode !== 200) throw new Error(`probe answered ${response.statusCode}`);
  return first;
}

/** How long the queued requests may take to reach the gateway's queue: the run is bounded. */
const HOLD_TIMEOUT_MS = 300_000;

export async function holdStreams(options: HeldStreamsOptions) {
  const agent = new Agent({ connections: options.streams + 16, pipelining: 1, headersTimeout: 600_000, bodyTimeout: 600_000 });
  const probeAgent = new Agent({ connections: 2, pipelining: 1 });
  const abandon = new AbortController();
  // One signal for every held request (each adds a listener).
  setMaxListeners(0, abandon.signal);
  const depthPrefix = `nova_model_queue_depth{gen_ai_request_model="${options.held.model}"} `;
  const rssBefore = rssMb(options.pid);
  const heapBefore = await heapUsedMb(options.metricsUrl);
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(options.pid))), 100);
  let firstBytes = 0;
  let completed = 0;
  let failed = 0;
  let abandoned = 0;
  let firstFailure: string | undefined;
  let allOpen: () => void = () => {};
  const opened = new Promise<void>((resolve) => (allOpen = resolve));
  const started = performance.now();

  const one = async () => {
    try {
      const response = await request(options.held.url, {
        method: 'POST',
        dispatcher: agent,
        signal: abandon.signal,
        headers: { 'content-type': 'application/json', ...options.held.headers },
        body: streamBody(options.held.model),
      });
      let seen = false;
      let tail = '';
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        if (!seen && ++firstBytes === options.streams) allOpen();
        seen = true;
        tail = (tail + chunk.toString()).slice(-64);
      }
      if (response.statusCode === 200 && tail.endsWith('data: [DONE]\n\n')) completed++;
      else {
        failed++;
        firstFailure ??= `${response.statusCode}: ${tail}`;
      }
    } catch (error) {
      if (abandon.signal.aborted) abandoned++;
      else {
        failed++;
        firstFailure ??= String(error);
      }
    }
    if (firstBytes + failed === options.streams) allOpen();
  };
  // Opened in batches so that the listen backlog is not what is measured.
  const all: Promise<void>[] = [];
  for (let i = 0; i < options.streams; i += 500) {
    for (let j = i; j < Math.min(options.streams, i + 500); j++) all.push(one());
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  // Queued: held once every request streams, waits in the queue, or has failed.
  let queueDepth = 0;
  let inFlight = 0;
  if (options.queued) {
    for (;;) {
      queueDepth = await gauge(options.metricsUrl, depthPrefix);
      if (firstBytes + queueDepth + failed >= options.streams) {
        // The gateway's own count of requests at the model's targets (at most their max_concurrent).
        inFlight = await gauge(options.metricsUrl, `nova_upstream_in_flight{gen_ai_request_model="${options.held.model}"`);
        break;
      }
      if (performance.now() - started > HOLD_TIMEOUT_MS) throw new Error(`held streams: ${firstBytes} streaming and ${queueDepth} queued of ${options.streams} after ${HOLD_TIMEOUT_MS / 1000} s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    allOpen();
  }
  await opened;
  const openSeconds = (performance.now() - started) / 1000;
  const streamingWhileHeld = firstBytes - completed;

  const direct: number[] = [];
  const gateway: number[] = [];
  for (let i = 0; i < options.probes; i++) {
    direct.push(await timeToFirstByte(probeAgent, options.probe.direct.url, {}, 'bench-1'));
    gateway.push(await timeToFirstByte(probeAgent, options.probe.gateway.url, options.probe.gateway.headers, 'bench-1'));
  }
  const rssWhileOpen = rssMb(options.pid);
  const heapWhileOpen = await heapUsedMb(options.metricsUrl);
  // A queued model's requests are abandoned: the queue gives each its place back at once.
  let queueDepthAfter: number | undefined;
  if (options.queued) {
    abandon.abort();
    await Promise.all(all);
    const leaving = performance.now();
    do {
      queueDepthAfter = await gauge(options.metricsUrl, depthPrefix);
      if (queueDepthAfter > 0) await new Promise((resolve) => setTimeout(resolve, 100));
    } while (queueDepthAfter > 0 && performance.now() - leaving < 30_000);
  }
  await Promise.all(all);
  clearInterval(sampler);
  await agent.close();
  await probeAgent.close();
  const perHeldKb = (before: number, after: number) => Number((((after - before) * 1024) / options.streams).toFixed(1));
  return {
    model: options.held.model,
    streams: options.streams,
    first_bytes: firstBytes,
    completed,
    failed,
    ...(firstFailure === undefined ? {} : { first_failure: firstFailure }),
    ...(options.queued ? { streaming_while_held: streamingWhileHeld, upstream_in_flight_while_held: inFlight, queued_while_held: queueDepth, abandoned, queue_depth_after: queueDepthAfter } : {}),
    seconds_to_open_all: Number(openSeconds.toFixed(1)),
    rss_before_mb: Math.round(rssBefore),
    rss_while_open_mb: Math.round(rssWhileOpen),
    rss_peak_mb: Math.round(peak),
    heap_used_before_mb: Math.round(heapBefore),
    heap_used_while_open_mb: Math.round(heapWhileOpen),
    /** What each held request adds to the gateway: (while open - before) / streams. */
    rss_per_held_kb: perHeldKb(rssBefore, rssWhileOpen),
    heap_per_held_kb: perHeldKb(heapBefore, heapWhileOpen),
    probes: options.probes,
    ttfb_direct_p50_ms: percentile(direct, 50),
    ttfb_gateway_p50_ms: percentile(gateway, 50),
    ttfb_added_p50_ms: Number((percentile(gateway, 50) - percentile(direct, 50)).toFixed(3)),
  };
}
