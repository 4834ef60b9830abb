/**
 * npm run bench: one run, every figure. Starts redis-server, a fake upstream with a fixed latency
 * and the gateway (real process: auth, rate limit, usage, metrics, conversations, info logging),
 * plus two bare passthroughs, then drives autocannon against
 *   (a) the upstream directly, (b) @fastify/http-proxy, (b') a bare undici passthrough, (c) the gateway,
 * non-streaming and streaming; measures the added latency of (c) over (a) at half of (c)'s peak,
 * time to first byte of streams, and the gateway's RSS while it holds 1,000 concurrent streams.
 * Writes bench/results/bench-<time>.json. Env: BENCH_DURATION_S (default 8), BENCH_CONNECTIONS (64),
 * UPSTREAM_LATENCY_MS (10), BENCH_STREAMS (1000), BENCH_CPU_PROF=1 (gateway --cpu-prof into bench/results).
 */
import autocannon from 'autocannon';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { freePort, RedisProcess } from '../test/support/redis-server.js';

const ROOT = new URL('../', import.meta.url).pathname;
const DURATION_S = Number(process.env.BENCH_DURATION_S ?? 8);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64);
const LATENCY_MS = Number(process.env.UPSTREAM_LATENCY_MS ?? 10);
const STREAMS = Number(process.env.BENCH_STREAMS ?? 1000);
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
const children: ChildProcess[] = [];

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  /** Fields added to the request body (the gateway's store: false). */
  extraBody?: Record<string, unknown>;
}

interface LoadResult {
  rps: number;
  p50_ms: number;
  p99_ms: number;
  non2xx: number;
  errors: number;
}

function node(script: string, env: Record<string, string>, extraArgs: string[] = []): ChildProcess {
  const child = spawn(process.execPath, [...extraArgs, '--import', 'tsx', script], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return child;
}

async function portLine(child: ChildProcess): Promise<number> {
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    const parsed = JSON.parse(line) as { port: number };
    child.stdout!.resume();
    return parsed.port;
  }
  throw new Error('child exited before listening');
}

function rssOf(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMb: kb('VmRSS') / 1024, hwmMb: kb('VmHWM') / 1024 };
}

function body(stream: boolean, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ model: 'bench-1', messages: [{ role: 'user', content: 'Hello, benchmark!' }], stream, max_tokens: 16, ...extra });
}

async function load(target: Target, stream: boolean, options: { durationS?: number } = {}): Promise<LoadResult> {
  const result = await autocannon({
    url: target.url,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...target.headers },
    body: body(stream, target.extraBody),
    connections: CONNECTIONS,
    duration: options.durationS ?? DURATION_S,
  });
  return {
    rps: Math.round(result.requests.average),
    p50_ms: result.latency.p50,
    p99_ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((x, y) => x - y);
  return Number((sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0).toFixed(2));
};

/**
 * Latency at a fixed arrival rate (open loop: requests leave on schedule whether or not earlier
 * ones have answered), each timed from its own send to its last byte. autocannon's rate mode
 * times from a different point and reported a p50 below the upstream's fixed latency.
 */
async function latencyAtRate(target: Target, rate: number, seconds = DURATION_S) {
  const agent = new Agent({ connections: 256, pipelining: 1 });
  const latencies: number[] = [];
  let failures = 0;
  const total = Math.floor(rate * seconds);
  const started = performance.now();
  const pending: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 1) await sleep(wait);
    pending.push(
      (async () => {
        const sent = performance.now();
        try {
          const response = await request(target.url, {
            method: 'POST',
            dispatcher: agent,
            headers: { 'content-type': 'application/json', ...target.headers },
            body: body(false, target.extraBody),
          });
          await response.body.text();
          if (response.statusCode === 200) latencies.push(performance.now() - sent);
          else failures++;
        } catch {
          failures++;
        }
      })(),
    );
  }
  await Promise.all(pending);
  await agent.close();
  return { rate_rps: rate, requests: total, failures, p50_ms: percentile(latencies, 50), p99_ms: percentile(latencies, 99) };
}

/** Time to response headers and to the first body byte of streaming requests, at low concurrency. */
async function timeToFirstByte(target: Target, count = 300, concurrency = 8) {
  const agent = new Agent({ connections: concurrency, pipelining: 1 });
  const headers: number[] = [];
  const first: number[] = [];
  let next = 0;
  const worker = async () => {
    while (next++ < count) {
      const started = performance.now();
      const response = await request(target.url, {
        method: 'POST',
        dispatcher: agent,
        headers: { 'content-type': 'application/json', ...target.headers },
        body: body(true),
      });
      headers.push(performance.now() - started);
      let seen = false;
      for await (const _chunk of response.body) {
        if (!seen) first.push(performance.now() - started);
        seen = true;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  await agent.close();
  return { headers_p50_ms: percentile(headers, 50), first_byte_p50_ms: percentile(first, 50), first_byte_p99_ms: percentile(first, 99) };
}

/** Opens STREAMS long streams at once against the gateway and samples its RSS until they end. */
async function holdStreams(gateway: Target, pid: number) {
  const agent = new Agent({ connections: STREAMS + 10, pipelining: 1, headersTimeout: 60_000, bodyTimeout: 60_000 });
  const before = rssOf(pid).rssMb;
  let peak = before;
  let open = 0;
  let maxOpen = 0;
  let completed = 0;
  let failed = 0;
  const sampler = setInterval(() => {
    peak = Math.max(peak, rssOf(pid).rssMb);
  }, 100);
  const started = performance.now();
  await Promise.all(
    Array.from({ length: STREAMS }, async () => {
      try {
        const response = await request(gateway.url, {
          method: 'POST',
          dispatcher: agent,
          headers: { 'content-type': 'application/json', ...gateway.headers },
          body: JSON.stringify({ model: 'bench-held', messages: [{ role: 'user', content: 'hold on' }], stream: true }),
        });
        open++;
        maxOpen = Math.max(maxOpen, open);
        let text = '';
        for await (const chunk of response.body) text += chunk;
        open--;
        if (response.statusCode === 200 && text.endsWith('data: [DONE]\n\n')) completed++;
        else failed++;
      } catch {
        failed++;
      }
    }),
  );
  clearInterval(sampler);
  await agent.close();
  return {
    streams: STREAMS,
    max_concurrently_open: maxOpen,
    completed,
    failed,
    seconds: Number(((performance.now() - started) / 1000).toFixed(1)),
    rss_before_mb: Math.round(before),
    rss_peak_mb: Math.round(peak),
  };
}

async function startGateway(upstreamPort: number, redisUrl: string) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nova-bench-'));
  const config = join(dir, 'gateway.yaml');
  writeFileSync(
    config,
    `models:
  - id: bench-1
    upstream: http://127.0.0.1:${upstreamPort}/fixed/v1
    timeout_ms: 30000
  - id: bench-held
    upstream: http://127.0.0.1:${upstreamPort}/held/v1
    timeout_ms: 30000
  - id: echo-1
    provider: echo
redis:
  key_prefix: bench
`,
  );
  const profile = process.env.BENCH_CPU_PROF === '1' ? ['--cpu-prof', `--cpu-prof-dir=${join(ROOT, 'bench/results')}`] : [];
  // The built server, as production runs it (npm start).
  const child = spawn(process.execPath, [...profile, 'dist/src/server.js'], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      HOST: '127.0.0.1',
      METRICS_PORT: String(await freePort()),
      REDIS_URL: redisUrl,
      NOVA_ADMIN_TOKEN: ADMIN_TOKEN,
      NOVA_CONFIG: config,
      LOG_LEVEL: 'info',
    },
    // Info logging stays on (its cost is part of the figures); the lines go to /dev/null.
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    const ready = await fetch(`${url}/readyz`).then((r) => r.ok, () => false);
    if (ready) break;
    await sleep(100);
  }
  const project = await fetch(`${url}/admin/v1/projects`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bench', requests_per_minute: 1_000_000, burst_limit: 1_000_000 }),
  });
  const secret = ((await project.json()) as { api_key: { secret: string } }).api_key.secret;
  return { child, url, secret };
}

async function main() {
  execFileSync('npm', ['run', 'build'], { cwd: ROOT, stdio: 'ignore' });
  const redis = await RedisProcess.start();
  const upstreamChild = node('bench/fake-upstream-server.ts', { UPSTREAM_LATENCY_MS: String(LATENCY_MS) });
  const upstreamPort = await portLine(upstreamChild);
  const proxyChild = node('bench/bare-proxy.ts', { BARE_UPSTREAM: `http://127.0.0.1:${upstreamPort}`, BARE_MODE: 'http-proxy' });
  const undiciChild = node('bench/bare-proxy.ts', { BARE_UPSTREAM: `http://127.0.0.1:${upstreamPort}`, BARE_MODE: 'undici' });
  const [proxyPort, undiciPort] = await Promise.all([portLine(proxyChild), portLine(undiciChild)]);
  const gateway = await startGateway(upstreamPort, redis.url);

  const targets: Record<'a' | 'b' | 'b_undici' | 'c' | 'c_store_off', Target> = {
    a: { name: '(a) upstream direct', url: `http://127.0.0.1:${upstreamPort}/fixed/v1/chat/completions`, headers: {} },
    b: { name: '(b) @fastify/http-proxy', url: `http://127.0.0.1:${proxyPort}/v1/chat/completions`, headers: {} },
    b_undici: { name: "(b') bare undici passthrough", url: `http://127.0.0.1:${undiciPort}/v1/chat/completions`, headers: {} },
    c: { name: '(c) nova-gateway', url: `${gateway.url}/v1/chat/completions`, headers: { authorization: `Bearer ${gateway.secret}` } },
    // Everything on but the conversation write (the request says store: false).
    c_store_off: {
      name: "(c') nova-gateway, store: false",
      url: `${gateway.url}/v1/chat/completions`,
      headers: { authorization: `Bearer ${gateway.secret}` },
      extraBody: { store: false },
    },
  };

  const results: Record<string, unknown> = {
    at: new Date().toISOString(),
    machine: { cpus: (await import('node:os')).cpus().length, node: process.version },
    settings: { duration_s: DURATION_S, connections: CONNECTIONS, upstream_latency_ms: LATENCY_MS, stream_chunks: 8 },
  };
  const throughput: Record<string, Record<string, LoadResult>> = { json: {}, stream: {} };
  for (const stream of [false, true]) {
    const mode = stream ? 'stream' : 'json';
    for (const [key, target] of Object.entries(targets)) {
      await load(target, stream, { durationS: 2 }); // warm-up (JIT, pools)
      throughput[mode]![key] = await load(target, stream);
      console.log(`${mode.padEnd(6)} ${target.name.padEnd(30)} ${JSON.stringify(throughput[mode]![key])}`);
    }
  }
  results.throughput = throughput;

  const halfRate = Math.max(1, Math.floor(throughput.json!.c!.rps / 2));
  const atHalf = {
    a: await latencyAtRate(targets.a, halfRate),
    b: await latencyAtRate(targets.b, halfRate),
    c: await latencyAtRate(targets.c, halfRate),
  };
  results.added_latency_at_half_peak = {
    rate_rps: halfRate,
    ...atHalf,
    added_p50_ms: Number((atHalf.c.p50_ms - atHalf.a.p50_ms).toFixed(2)),
    added_p99_ms: Number((atHalf.c.p99_ms - atHalf.a.p99_ms).toFixed(2)),
    bare_proxy_added_p50_ms: Number((atHalf.b.p50_ms - atHalf.a.p50_ms).toFixed(2)),
  };
  console.log(`added latency at ${halfRate} req/s (half of (c) peak): ${JSON.stringify(results.added_latency_at_half_peak)}`);

  const ttfb: Record<string, unknown> = {};
  for (const key of ['a', 'b', 'c'] as const) ttfb[key] = await timeToFirstByte(targets[key]);
  results.stream_time_to_first_byte = ttfb;
  console.log(`stream time to first byte: ${JSON.stringify(ttfb)}`);

  results.held_streams = await holdStreams(targets.c, gateway.child.pid!);
  console.log(`held streams: ${JSON.stringify(results.held_streams)}`);
  results.gateway_peak_rss_mb_whole_run = Math.round(rssOf(gateway.child.pid!).hwmMb);
  results.targets = {
    c_vs_b_throughput_json: Number((throughput.json!.c!.rps / throughput.json!.b!.rps).toFixed(2)),
    c_vs_b_throughput_stream: Number((throughput.stream!.c!.rps / throughput.stream!.b!.rps).toFixed(2)),
    c_store_off_vs_b_throughput_json: Number((throughput.json!.c_store_off!.rps / throughput.json!.b!.rps).toFixed(2)),
    added_p50_ms: (results.added_latency_at_half_peak as { added_p50_ms: number }).added_p50_ms,
    held_streams_rss_peak_mb: (results.held_streams as { rss_peak_mb: number }).rss_peak_mb,
  };
  console.log(`targets: ${JSON.stringify(results.targets)} (whole-run gateway peak RSS ${results.gateway_peak_rss_mb_whole_run} MB)`);

  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const file = join(ROOT, 'bench/results', `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`written: ${file}`);

  gateway.child.kill('SIGTERM');
  await new Promise((resolve) => gateway.child.once('exit', resolve));
  await redis.stop();
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
  });
