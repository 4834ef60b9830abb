/**
 * Many slow streams held open through one gateway at once: its peak RSS while they are open, and
 * the time to first byte of new streams meanwhile, through the gateway and to the upstream directly
 * (probes alternate, one at a time, so both see the same load).
 */
import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';

export interface HeldStreamsOptions {
  /** The gateway's held-stream URL and headers. */
  held: { url: string; headers: Record<string, string> };
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

export async function holdStreams(options: HeldStreamsOptions) {
  const agent = new Agent({ connections: options.streams + 16, pipelining: 1, headersTimeout: 120_000, bodyTimeout: 120_000 });
  const probeAgent = new Agent({ connections: 2, pipelining: 1 });
  const rssBefore = rssMb(options.pid);
  let peak = rssBefore;
  const sampler = setInterval(() => (peak = Math.max(peak, rssMb(options.pid))), 100);
  let firstBytes = 0;
  let completed = 0;
  let failed = 0;
  let allOpen: () => void = () => {};
  const opened = new Promise<void>((resolve) => (allOpen = resolve));
  const started = performance.now();

  const one = async () => {
    try {
      const response = await request(options.held.url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', ...options.held.headers },
        body: streamBody('bench-held'),
      });
      let seen = false;
      let tail = '';
      for await (const chunk of response.body as AsyncIterable<Buffer>) {
        if (!seen && ++firstBytes === options.streams) allOpen();
        seen = true;
        tail = (tail + chunk.toString()).slice(-64);
      }
      if (response.statusCode === 200 && tail.endsWith('data: [DONE]\n\n')) completed++;
      else failed++;
    } catch {
      failed++;
    }
    if (firstBytes + failed === options.streams) allOpen();
  };
  // Opened in batches so that the listen backlog is not what is measured.
  const all: Promise<void>[] = [];
  for (let i = 0; i < options.streams; i += 500) {
    for (let j = i; j < Math.min(options.streams, i + 500); j++) all.push(one());
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  await opened;
  const openSeconds = (performance.now() - started) / 1000;

  const direct: number[] = [];
  const gateway: number[] = [];
  for (let i = 0; i < options.probes; i++) {
    direct.push(await timeToFirstByte(probeAgent, options.probe.direct.url, {}, 'bench-1'));
    gateway.push(await timeToFirstByte(probeAgent, options.probe.gateway.url, options.probe.gateway.headers, 'bench-1'));
  }
  const rssWhileOpen = rssMb(options.pid);
  await Promise.all(all);
  clearInterval(sampler);
  await agent.close();
  await probeAgent.close();
  return {
    streams: options.streams,
    first_bytes: firstBytes,
    completed,
    failed,
    seconds_to_open_all: Number(openSeconds.toFixed(1)),
    rss_before_mb: Math.round(rssBefore),
    rss_while_open_mb: Math.round(rssWhileOpen),
    rss_peak_mb: Math.round(peak),
    probes: options.probes,
    ttfb_direct_p50_ms: percentile(direct, 50),
    ttfb_gateway_p50_ms: percentile(gateway, 50),
    ttfb_added_p50_ms: Number((percentile(gateway, 50) - percentile(direct, 50)).toFixed(3)),
  };
}
