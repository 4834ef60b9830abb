/**
 * npm run bench: every figure of the performance issue in one run, side by side.
 *
 * Each proxy under test runs alone on core 1 (`taskset -c 1`); this process, wrk, the upstream
 * (bench/upstream-server.ts) and Redis share core 0. Targets: the upstream directly, nginx with one
 * worker (when installed), a bare @fastify/http-proxy, and nova-gateway as `npm start` runs it (its
 * Node flags included, which every Node process of the run takes) with every feature on (auth, the
 * admission script with request rate, token rate, concurrency and budgets, usage, cost, metrics,
 * access log at info to a pipe that discards it), without and with `store: true`; and its
 * `POST /v1/messages`, translated to the same upstream's chat completions (`nova_messages`) and passed
 * through to its native Messages API (`nova_messages_native`), throughput only, whose same-round
 * ratios to `nova` are `messages_vs_chat_*` and `native_vs_chat_*`.
 * `nova_key`: the chat target with a key that has limits and budgets of its own as well as the
 * project's (both levels decided in the one admission script call), throughput only; its same-round
 * ratios to `nova` are `key_vs_project_*` and, of CPU per request, `cpu_key_vs_project_*` (and
 * `redis_cpu_key_vs_project_*`). `nova_fleet`: the chat target to a model with two equal targets
 * (the upstream's two ports, no max_concurrent: nothing queues), throughput only; its same-round
 * ratios to `nova` are `fleet_vs_single_*` and `cpu_fleet_vs_single_*`. `nova_traced`: the chat target
 * through a second gateway with tracing on (always_on sampler, OTLP http/protobuf to bench/otlp-sink.ts
 * on the bench's core), throughput only; its same-round ratios to `nova` are `traced_vs_untraced_*`
 * and `cpu_traced_vs_untraced_*`, and `tracing_sink` holds what the sink took (no span: the run fails).
 * For each: JSON and stream throughput (wrk, one thread, BENCH_CONNECTIONS connections) and the p50
 * at one connection; then BENCH_HELD_STREAMS slow streams held through a fresh gateway at once (peak
 * RSS, RSS and heap per held request, time to first byte of new streams meanwhile), and as many
 * requests through another fresh gateway to a model whose two targets take BENCH_HELD_MAX_CONCURRENT
 * (100) each, so that the rest wait in its queue (`held_streams_queued`, with the per-request ratios
 * to the streams'). Prints one table; writes bench/results/bench-<time>.json.
 *
 * Env: BENCH_SECONDS (5 per measure), BENCH_ROUNDS (3: every target measured once per round, in
 * turn, so that the machine's slow spells hit all of them; figures are medians), BENCH_WARM_UP_SECONDS (3), BENCH_CONNECTIONS (32),
 * BENCH_HELD_STREAMS (10000, fewer when the open-file limit cannot hold two sockets per stream),
 * BENCH_HELD_INTERVAL_MS (1000) and BENCH_HELD_EVENTS (20): a held stream's pace and length,
 * BENCH_HELD_MAX_CONCURRENT (100): max_concurrent of each of the queued model's two targets,
 * BENCH_PROBES (200), BENCH_TARGETS (comma list of keys below), BENCH_REVERSE=1 (each round in the
 * opposite order), BENCH_MODES (json,stream),
 * BENCH_PARTS (throughput,latency,held), BENCH_CPU_PROF=1 (gateway --cpu-prof into bench/results),
 * BENCH_RESULTS (directory of the JSON, default bench/results).
 * A/B: BENCH_B_ENV (`KEY=VALUE,...`, e.g. `LOG_LEVEL=warn` or `REDIS_URL=` for the in-memory store)
 * and/or BENCH_B_BUILD (a gateway compiled elsewhere: `tsc -p tsconfig.build.json --outDir <dir>`
 * in a checkout of another commit) and/or BENCH_B_NODE_ARGS (Node and V8 flags, e.g.
 * `--single-threaded-gc`, which NODE_OPTIONS does not take) start a second gateway, targets `nova_b` and `nova_b_store`, measured in the same
 * rounds as `nova` and `nova_store`: the machine's slow spells hit both, and `b_vs_nova_*` is their same-round ratio.
 * BENCH_NODE: the Node of the processes under test (default: the image's major, see nodeUnderTest).
 * The machine's cpuidle driver and guest halt-polling (`machine` in the JSON) are printed and recorded, and each measure's halts of
 * both cores per request (`core_halts_per_request` for the proxy's, `load_core_halts_per_request` for the load generator's):
 * what waking an idle core costs decides the one-connection figures.
 */
import { build } from '../scripts/build-if-stale.mjs';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { holdStreams } from './held-streams.js';
import { nginxInstalled, startNginx } from './nginx.js';
import { wrk, type WrkRequest, type WrkResult } from './wrk.js';
import { freePort } from '../scripts/free-port.js';
import { RedisProcess } from '../scripts/redis-process.js';
import { npmStartFlags } from '../scripts/node-flags.js';

const ROOT = new URL('../', import.meta.url).pathname;
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const WARM_UP_SECONDS = Number(process.env.BENCH_WARM_UP_SECONDS ?? 3);
/** The gateway is compiled here, not into dist/ (which `npm start` and its test own). */
const BUILD_DIR = 'bench/.build';
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
/** `max_concurrent` of each of the queued model's two targets (the held streams' queued run). */
const HELD_MAX_CONCURRENT = Number(process.env.BENCH_HELD_MAX_CONCURRENT ?? 100);
const PARTS = new Set((process.env.BENCH_PARTS ?? 'throughput,latency,held').split(','));
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
/** How long the gateway may take to exit after SIGTERM: its drain timeout (30 s) and some. */
const STOP_TIMEOUT_MS = 40_000;
const children: ChildProcess[] = [];
/** Stops the run's Redis, whatever ends the run. */
let stopRedis: () => Promise<void> = async () => {};

const hasTaskset = spawnSync('taskset', ['-V'], { stdio: 'ignore' }).status === 0;
const pinned = hasTaskset && cpus().length >= 2;
/** The proxy under test gets core 1 to itself; everything else was moved to core 0 at start. */
const underTest = pinned ? ['taskset', '-c', '1'] : [];

/**
 * The Node that the processes under test (gateway, bare proxy, upstream) run on: by default the
 * image's (the Dockerfile's NODE_IMAGE major), which production runs, fetched with npx as the `node`
 * npm package when this machine runs another (as .ci/node-lts.sh does for CI). BENCH_NODE: a major version,
 * a path to a node binary, or `current` for the Node running this script.
 */
function nodeUnderTest(): { path: string; version: string; note?: string } {
  const image = /^ARG NODE_IMAGE=node:(\d+)/m.exec(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'))?.[1];
  const wanted = process.env.BENCH_NODE || image || 'current';
  const current = { path: process.execPath, version: process.version };
  if (wanted === 'current' || wanted === process.versions.node.split('.')[0]) return current;
  const path = wanted.includes('/')
    ? wanted
    : spawnSync('npx', ['--yes', '--package', `node@${wanted}`, '--', 'node', '-p', 'process.execPath'], { encoding: 'utf8' }).stdout?.trim();
  const version = path ? spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout?.trim() : undefined;
  if (!path || !version) return { ...current, note: `Node ${wanted} could not be had (BENCH_NODE): the processes under test run on this script's ${process.version}` };
  return { path, version };
}
const NODE = nodeUnderTest();

/** The Node flags `npm start` gives the gateway: the bench runs it as production does, and the other Node processes alike. */
const START_FLAGS = npmStartFlags(ROOT);

/**
 * The kernel's idle policy, which decides what waking a sleeping process costs (on a VM, whether
 * the guest polls before halting an idle vCPU): the one-connection figures depend on it most.
 */
function idlePolicy(): { cpuidle_driver: string | null; guest_halt_poll_ns: number | null } {
  const read = (path: string) => {
    try {
      return readFileSync(path, 'utf8').trim();
    } catch {
      return null;
    }
  };
  const haltPoll = read('/sys/module/haltpoll/parameters/guest_halt_poll_ns');
  return { cpuidle_driver: read('/sys/devices/system/cpu/cpuidle/current_driver'), guest_halt_poll_ns: haltPoll === null ? null : Number(haltPoll) };
}
const IDLE = idlePolicy();

/**
 * How many times a core has halted so far (entries into its idle states other than the kernel's
 * polling one): each halt is a wake-up to pay, which on a VM costs tens of microseconds, and a
 * process on another core that wakes a reader on a halted core pays an interrupt to it.
 */
function coreHalts(core: number): number | undefined {
  const dir = `/sys/devices/system/cpu/cpu${core}/cpuidle`;
  try {
    return readdirSync(dir)
      .filter((state) => state.startsWith('state') && readFileSync(join(dir, state, 'name'), 'utf8').trim() !== 'POLL')
      .reduce((sum, state) => sum + Number(readFileSync(join(dir, state, 'usage'), 'utf8')), 0);
  } catch {
    return undefined;
  }
}

function openFileLimit(): number {
  const out = spawnSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).stdout.trim();
  return out === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(out);
}

function launch(command: string[], env: Record<string, string> = {}): ChildProcess {
  const [file, ...args] = command;
  const child = spawn(file!, args, { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return child;
}

/** The ports a child prints when listening: {"port": n}, or {"port": n, "ports": [n, m]}. */
async function portLine(child: ChildProcess): Promise<number[]> {
  for await (const line of createInterface({ input: child.stdout! })) {
    child.stdout!.resume();
    const { port, ports } = JSON.parse(line) as { port: number; ports?: number[] };
    return ports ?? [port];
  }
  throw new Error('child exited before listening');
}

async function waitFor(url: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    if (await fetch(url).then((r) => r.status < 500, () => false)) return;
    await sleep(100);
  }
  throw new Error(`${url} never answered`);
}

async function startGateway(
  [upstreamPort, secondPort]: number[],
  redisUrl: string,
  variant: { env?: Record<string, string>; build?: string; nodeArgs?: string[] } = {},
) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'nova-bench-'));
  const config = join(dir, 'gateway.yaml');
  const pricing = '{ input_per_million: 0.2, output_per_million: 0.6 }';
  writeFileSync(
    config,
    `models:
  - id: bench-1
    upstream: http://127.0.0.1:${upstreamPort}/fixed/v1
    endpoints: [chat, messages]
    timeout_ms: 30000
    pricing: ${pricing}
  - id: bench-native
    upstream: http://127.0.0.1:${upstreamPort}/fixed/v1
    api: anthropic
    endpoints: [messages]
    timeout_ms: 30000
    pricing: ${pricing}
  - id: bench-fleet
    targets:
      - { upstream: 'http://127.0.0.1:${upstreamPort}/fixed/v1' }
      - { upstream: 'http://127.0.0.1:${secondPort}/fixed/v1' }
    timeout_ms: 30000
    pricing: ${pricing}
  - id: bench-held
    upstream: http://127.0.0.1:${upstreamPort}/held/v1
    timeout_ms: 120000
    pricing: ${pricing}
  - id: bench-queued
    targets:
      - { upstream: 'http://127.0.0.1:${upstreamPort}/held/v1', max_concurrent: ${HELD_MAX_CONCURRENT} }
      - { upstream: 'http://127.0.0.1:${secondPort}/held/v1', max_concurrent: ${HELD_MAX_CONCURRENT} }
    queue: { max_wait_ms: 600000, max_depth: 1000000 }
    timeout_ms: 120000
    pricing: ${pricing}
server:
  max_connections_per_address: 0
conversations:
  retention_seconds: 3600
  max_bytes_per_project: 1099511627776
rate_limits:
  management_requests_per_minute: 1000000
redis:
  key_prefix: bench
`,
  );
  const profile = process.env.BENCH_CPU_PROF === '1' ? ['--cpu-prof', `--cpu-prof-dir=${join(ROOT, 'bench/results')}`] : [];
  const metricsPort = await freePort();
  const child = launch(
    [...underTest, NODE.path, ...START_FLAGS, ...(variant.nodeArgs ?? []), ...profile, `${variant.build ?? BUILD_DIR}/src/server.js`],
    {
      PORT: String(port),
      HOST: '127.0.0.1',
      METRICS_PORT: String(metricsPort),
      REDIS_URL: redisUrl,
      NOVA_ADMIN_TOKEN: ADMIN_TOKEN,
      NOVA_CONFIG: config,
      LOG_LEVEL: 'info',
      // Tracing is off unless the variant turns it on (`nova_traced`), whatever this shell's OTEL_* say
      // (src/tracing/tracing-settings.ts: an empty endpoint is none).
      OTEL_EXPORTER_OTLP_ENDPOINT: '',
      OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: '',
      ...variant.env,
    },
  );
  child.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  // The access log stays at info (its cost is part of the figures); its lines go to this pipe and
  // are discarded, as a container's stdout is read by its runtime.
  child.stdout!.resume();
  const url = `http://127.0.0.1:${port}`;
  // A gateway that exits at start (a bad flag or setting) fails the run at once, with its code.
  const exited = new Promise<never>((_, reject) =>
    child.once('exit', (code, signal) => reject(new Error(`the gateway exited (${signal ?? `code ${code}`}) before it was ready`))),
  );
  exited.catch(() => {});
  await Promise.race([waitFor(`${url}/readyz`), exited]);
  const created = await fetch(`${url}/admin/v1/projects`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    // Every limit set, none reached: the admission script checks and settles all of them.
    body: JSON.stringify({
      name: 'bench',
      requests_per_minute: 1_000_000,
      burst_limit: 1_000_000,
      tokens_per_minute: 1_000_000_000_000,
      max_concurrent_requests: 1_000_000,
      daily_tokens: 1_000_000_000_000_000,
      monthly_tokens: 1_000_000_000_000_000,
      monthly_cost: 1_000_000_000,
    }),
  });
  if (!created.ok) throw new Error(`project creation answered ${created.status}: ${await created.text()}`);
  const project = (await created.json()) as { id: string; api_key: { secret: string } };
  // A second key of the same project with the project's policy as its own limits and budgets (none
  // reached either): its requests are admitted and settled on both levels, the `nova_key` target.
  const keyed = await fetch(`${url}/admin/v1/projects/${project.id}/api-keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      name: 'bench-key-level',
      rate_limits: { requests_per_minute: 1_000_000, burst_limit: 1_000_000, tokens_per_minute: 1_000_000_000_000, max_concurrent_requests: 1_000_000 },
      budgets: { daily_tokens: 1_000_000_000_000_000, monthly_tokens: 1_000_000_000_000_000, monthly_cost: 1_000_000_000 },
    }),
  });
  if (!keyed.ok) throw new Error(`key creation answered ${keyed.status}: ${await keyed.text()}`);
  const keySecret = ((await keyed.json()) as { secret: string }).secret;
  return { child, url, metricsUrl: `http://127.0.0.1:${metricsPort}/metrics`, secret: project.api_key.secret, keySecret };
}

/**
 * The `nova_traced` gateway: `startGateway`'s, with tracing on (src/tracing/tracing-settings.ts:
 * always_on, so every request is traced whatever its headers; http/protobuf) exporting to an OTLP
 * sink (bench/otlp-sink.ts) started here, on the bench's core: its work is the collector's, not
 * the gateway's. `sinkFigures(requests, inFlightAtStops)`: what the sink took, per request wrk
 * counted; a run whose sink took no span, or an export it could not decode, fails (the target would
 * have measured a gateway that traced nothing).
 */
async function startTracedGateway(upstreamPorts: number[], redisUrl: string) {
  const sink = launch([NODE.path, ...START_FLAGS, '--import', 'tsx', 'bench/otlp-sink.ts']);
  const [sinkPort] = await portLine(sink);
  const gateway = await startGateway(upstreamPorts, redisUrl, {
    env: {
      OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${sinkPort}`,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: '',
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_SDK_DISABLED: '',
      OTEL_TRACES_EXPORTER: '',
    },
  });
  // The sink's own start (loading tsx) is not its work per span.
  const sinkCpuBefore = cpuSeconds(sink.pid!);
  const sinkFigures = async (requests: number, inFlightAtStops: number) => {
    const stats = (await (await fetch(`http://127.0.0.1:${sinkPort}/stats`)).json()) as {
      requests: number;
      bytes: number;
      spans: number;
      undecoded: number;
      names: Record<string, number>;
    };
    // One server span per chat request (src/tracing/request-spans.ts), whatever else the gateway
    // traced (its /readyz while the bench waited for it, the admin calls that set it up). wrk counts
    // the requests it saw answered: each run leaves up to one a connection in flight at its stop,
    // which the gateway still serves (and traces), so a gateway that dropped no span has at least
    // as many chat server spans as wrk's requests, and at most `in_flight_at_stops` more.
    const chatServerSpans = stats.names['POST /v1/chat/completions'] ?? 0;
    const figures = {
      export_requests: stats.requests,
      bytes: stats.bytes,
      spans: stats.spans,
      undecoded: stats.undecoded,
      gateway_requests: requests,
      in_flight_at_stops: inFlightAtStops,
      chat_server_spans: chatServerSpans,
      // Per traced request (its server span): three for a chat request answered.
      spans_per_request: chatServerSpans > 0 ? Number((stats.spans / chatServerSpans).toFixed(3)) : 0,
      chat_server_spans_per_request: requests > 0 ? Number((chatServerSpans / requests).toFixed(3)) : 0,
      spans_by_name: stats.names,
      bytes_per_span: stats.spans > 0 ? Math.round(stats.bytes / stats.spans) : null,
      sink_cpu_us_per_span: stats.spans > 0 ? Number((((cpuSeconds(sink.pid!) - sinkCpuBefore) * 1e6) / stats.spans).toFixed(2)) : null,
    };
    if (stats.spans === 0 || stats.undecoded > 0) {
      console.log(`  FAILURES: the OTLP sink took ${stats.spans} spans in ${stats.requests} export requests (${stats.undecoded} undecoded)`);
      failures++;
    }
    return figures;
  };
  return { gateway, sinkFigures };
}

/**
 * Stops a gateway with SIGTERM (it writes its CPU profile then) within its drain timeout (30 s by
 * default); one that does not exit is reported and killed, so that the bench always ends.
 */
async function stopGateway(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<boolean>((resolve) => child.once('exit', () => resolve(true)));
  child.kill('SIGTERM');
  if (await Promise.race([exited, sleep(STOP_TIMEOUT_MS).then(() => false)])) return;
  console.log(`the gateway did not exit within ${STOP_TIMEOUT_MS / 1000} s of SIGTERM: killed`);
  child.kill('SIGKILL');
  process.exitCode = 1;
}

/**
 * BENCH_B_ENV `KEY=VALUE,KEY=VALUE` (a value may hold `=`), BENCH_B_BUILD a compiled gateway's
 * directory, BENCH_B_NODE_ARGS Node and V8 flags (space-separated; also those NODE_OPTIONS refuses).
 */
function variantOf(env: string, build: string | undefined, nodeArgs: string): { env: Record<string, string>; build?: string; nodeArgs: string[] } {
  const pairs = env.split(',').filter(Boolean).map((pair): [string, string] => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]);
  return { env: Object.fromEntries(pairs), build, nodeArgs: nodeArgs.split(/\s+/).filter(Boolean) };
}
/** What makes gateway B differ, for its row's name. */
const variantBName = [process.env.BENCH_B_ENV, process.env.BENCH_B_BUILD, process.env.BENCH_B_NODE_ARGS].filter(Boolean).join(', ');

const chatBody = (stream: boolean, extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: 'bench-1', messages: [{ role: 'user', content: 'Hello, benchmark!' }], stream, max_tokens: 16, ...extra });
/** The same question in Anthropic's Messages API (max_tokens is required there). */
const messagesBody = (model: string, stream: boolean) =>
  JSON.stringify({ model, max_tokens: 16, messages: [{ role: 'user', content: 'Hello, benchmark!' }], stream });

interface Target {
  key: string;
  name: string;
  /** The process under test (with its children: nginx's worker), for its CPU time; none for the upstream. */
  pid?: number;
  /** A gateway: Redis's CPU time per request is measured too (the shared cost every replica adds to). */
  usesRedis?: boolean;
  chat?: (stream: boolean) => WrkRequest;
  get?: WrkRequest;
  /** Throughput only: the one-connection p50 is not measured (keeps the default run short). */
  noLatency?: boolean;
  /** Not in the default set: measured only when BENCH_TARGETS names it. */
  onRequest?: boolean;
}

type Measured = WrkResult & {
  cpu_us_per_request?: number;
  redis_cpu_us_per_request?: number;
  /** Halts of the proxy's core (1) and of the load generator's (0) per request. */
  core_halts_per_request?: number;
  load_core_halts_per_request?: number;
};
const CLOCK_TICKS = 100;

/** CPU time (user + system) of a process and its direct children, from /proc. */
function cpuSeconds(pid: number): number {
  const ticks = (id: string) => {
    const fields = readFileSync(`/proc/${id}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return Number(fields[11]) + Number(fields[12]);
  };
  const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  return [String(pid), ...kids].reduce((sum, id) => sum + ticks(id), 0) / CLOCK_TICKS;
}

/** A run with failures is not a figure: show what one of its requests answers. */
async function showOne(request: WrkRequest): Promise<void> {
  const response = await fetch(request.url, {
    method: request.method ?? 'POST',
    headers: { ...(request.body ? { 'content-type': 'application/json' } : {}), ...request.headers },
    body: request.body,
  });
  console.log(`  FAILURES: one request now answers ${response.status}: ${(await response.text()).slice(0, 300)}`);
  failures++;
}
let failures = 0;

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, column) => Math.max(...rows.map((row) => row[column]!.length)));
  const line = (row: string[]) => `| ${row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!))).join(' | ')} |`;
  return [line(rows[0]!), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...rows.slice(1).map(line)].join('\n');
}

async function main() {
  if (spawnSync('wrk', ['-v']).error) throw new Error('wrk is not installed (apt-get install wrk)');
  if (pinned) execFileSync('taskset', ['-a', '-p', '-c', '0', String(process.pid)], { stdio: 'ignore' });
  else console.log(hasTaskset ? 'one CPU only: running unpinned' : 'taskset is not installed: running unpinned');
  console.log(NODE.note ?? `processes under test on Node ${NODE.version} (the image's; BENCH_NODE=current for this script's ${process.version})`);
  console.log(`cpuidle driver: ${IDLE.cpuidle_driver ?? 'unknown'}; guest_halt_poll_ns: ${IDLE.guest_halt_poll_ns ?? 'none'}`);
  build(ROOT, BUILD_DIR);

  const redis = await RedisProcess.start();
  stopRedis = () => redis.stop();
  // Every Node process of the run takes npm start's flags, so that the ratios compare the proxies'
  // work, not V8 heap policies (the flag shortens the bare proxy's requests as much as the gateway's).
  const upstreamChild = launch([NODE.path, ...START_FLAGS, '--import', 'tsx', 'bench/upstream-server.ts']);
  const upstreamPorts = await portLine(upstreamChild);
  const upstreamPort = upstreamPorts[0]!;
  const proxyChild = launch([...underTest, NODE.path, ...START_FLAGS, '--import', 'tsx', 'bench/bare-proxy.ts'], {
    BARE_UPSTREAM: `http://127.0.0.1:${upstreamPort}`,
  });
  const [proxyPort] = await portLine(proxyChild);
  const nginx = nginxInstalled();
  const nginxPort = await freePort();
  let nginxChild: ChildProcess | undefined;
  if (nginx) {
    nginxChild = startNginx(nginx, underTest, nginxPort, upstreamPort);
    children.push(nginxChild);
    await waitFor(`http://127.0.0.1:${nginxPort}/v1/models`);
  } else console.log('nginx is not installed: its row is left out');
  const gateway = await startGateway(upstreamPorts, redis.url);
  const auth = { authorization: `Bearer ${gateway.secret}` };
  // What Anthropic's SDKs send: the key as x-api-key, and the API version.
  const anthropicAuth = { 'x-api-key': gateway.secret, 'anthropic-version': '2023-06-01' };
  // A second gateway to compare with, measured in the same rounds (its own environment or build).
  const variantB = variantBName ? variantOf(process.env.BENCH_B_ENV ?? '', process.env.BENCH_B_BUILD, process.env.BENCH_B_NODE_ARGS ?? '') : undefined;
  const gatewayB = variantB ? await startGateway(upstreamPorts, redis.url, variantB) : undefined;
  const wanted = (target: Target) => (process.env.BENCH_TARGETS ? process.env.BENCH_TARGETS.split(',').includes(target.key) : !target.onRequest);
  // `nova_traced`: the same gateway with tracing on, every request sampled, exporting OTLP/protobuf
  // (the default protocol, src/tracing/tracing-settings.ts) with the batch processor's defaults
  // (OTEL_BSP_* pass through from this shell) to a sink on the bench's core (bench/otlp-sink.ts).
  const traced = wanted({ key: 'nova_traced', name: '' }) ? await startTracedGateway(upstreamPorts, redis.url) : undefined;

  const direct = (path: string) => (stream: boolean): WrkRequest => ({ url: `http://127.0.0.1:${path}/chat/completions`, body: chatBody(stream) });
  const allTargets: Target[] = [
    { key: 'upstream', name: 'upstream directly', chat: direct(`${upstreamPort}/fixed/v1`) },
    ...(nginx ? [{ key: 'nginx', name: 'nginx, 1 worker', pid: nginxChild?.pid, chat: direct(`${nginxPort}/v1`) }] : []),
    { key: 'bare', name: 'bare @fastify/http-proxy', pid: proxyChild.pid, chat: direct(`${proxyPort}/v1`) },
    {
      key: 'nova',
      usesRedis: true,
      name: 'nova, every feature on',
      pid: gateway.child.pid,
      chat: (stream) => ({ url: `${gateway.url}/v1/chat/completions`, headers: auth, body: chatBody(stream) }),
    },
    {
      key: 'nova_store',
      usesRedis: true,
      name: 'nova, every feature on, store: true',
      pid: gateway.child.pid,
      chat: (stream) => ({ url: `${gateway.url}/v1/chat/completions`, headers: auth, body: chatBody(stream, { store: true }) }),
    },
    // The same request with a key that has its own limits and budgets besides the project's: both
    // levels in the one admission script call (src/store/redis/quota-batch.lua), against `nova`
    // (the project's policy only) in the same rounds.
    {
      key: 'nova_key',
      usesRedis: true,
      noLatency: true,
      name: "nova, key's own limits and budgets too",
      pid: gateway.child.pid,
      chat: (stream) => ({ url: `${gateway.url}/v1/chat/completions`, headers: { authorization: `Bearer ${gateway.keySecret}` }, body: chatBody(stream) }),
    },
    // The same request to a model with two equal targets (two origins of the upstream, no
    // max_concurrent: nothing queues), balanced per request (src/model-call/target-fleet.ts),
    // against `nova` (a model with one upstream) in the same rounds.
    {
      key: 'nova_fleet',
      usesRedis: true,
      noLatency: true,
      name: 'nova, model with two targets',
      pid: gateway.child.pid,
      chat: (stream) => ({ url: `${gateway.url}/v1/chat/completions`, headers: auth, body: chatBody(stream, { model: 'bench-fleet' }) }),
    },
    // The same request through a gateway with tracing on (three spans a chat request: server, model
    // call, upstream attempt), against `nova` (tracing off) in the same rounds.
    ...(traced
      ? [
          {
            key: 'nova_traced',
            usesRedis: true,
            noLatency: true,
            name: 'nova, tracing on (always_on, OTLP/protobuf)',
            pid: traced.gateway.child.pid,
            chat: (stream: boolean) => ({ url: `${traced.gateway.url}/v1/chat/completions`, headers: { authorization: `Bearer ${traced.gateway.secret}` }, body: chatBody(stream) }),
          },
        ]
      : []),
    // POST /v1/messages (src/model-call/messages-call.ts), against `nova`'s chat completions in the
    // same rounds: translated to the same upstream's chat completions, and passed through natively.
    {
      key: 'nova_messages',
      usesRedis: true,
      noLatency: true,
      name: 'nova /v1/messages, translated to chat',
      pid: gateway.child.pid,
      chat: (stream) => ({ url: `${gateway.url}/v1/messages`, headers: anthropicAuth, body: messagesBody('bench-1', stream) }),
    },
    {
      key: 'nova_messages_native',
      usesRedis: true,
      noLatency: true,
      name: 'nova /v1/messages, native (api: anthropic)',
      pid: gateway.child.pid,
      chat: (stream) => ({ url: `${gateway.url}/v1/messages`, headers: anthropicAuth, body: messagesBody('bench-native', stream) }),
    },
    ...(gatewayB
      ? [
          {
            key: 'nova_b',
            usesRedis: true,
            name: `nova B (${variantBName})`,
            pid: gatewayB.child.pid,
            chat: (stream: boolean) => ({ url: `${gatewayB.url}/v1/chat/completions`, headers: { authorization: `Bearer ${gatewayB.secret}` }, body: chatBody(stream) }),
          },
          {
            key: 'nova_b_store',
            usesRedis: true,
            name: `nova B, store: true`,
            pid: gatewayB.child.pid,
            chat: (stream: boolean) => ({
              url: `${gatewayB.url}/v1/chat/completions`,
              headers: { authorization: `Bearer ${gatewayB.secret}` },
              body: chatBody(stream, { store: true }),
            }),
          },
        ]
      : []),
    { key: 'nova_get', name: 'nova GET /v1/models/bench-1 (no upstream)', pid: gateway.child.pid, usesRedis: true, get: { url: `${gateway.url}/v1/models/bench-1`, method: 'GET', headers: auth } },
  ];
  const targets = allTargets.filter(wanted);
  // BENCH_REVERSE=1: each round measures the targets in the opposite order, to tell a target's own
  // cost from what its place in the round costs (a same-round ratio can lean with the order).
  if (process.env.BENCH_REVERSE === '1') targets.reverse();

  const results: Record<string, unknown> = {
    at: new Date().toISOString(),
    machine: { cpus: cpus().length, cpu_model: cpus()[0]?.model, node: process.version, node_under_test: NODE.version, pinned, ...IDLE },
    method: {
      node_flags: START_FLAGS,
      seconds: SECONDS,
      rounds: ROUNDS,
      warm_up_seconds: WARM_UP_SECONDS,
      connections: CONNECTIONS,
      load_generator: 'wrk -t1',
      pinning: pinned ? 'proxy under test: taskset -c 1; wrk, upstream, OTLP sink, Redis, this process: core 0' : 'unpinned',
      ...(traced ? { tracing: 'nova_traced: OTEL_TRACES_SAMPLER=always_on, OTLP http/protobuf, batch processor defaults, to bench/otlp-sink.ts' } : {}),
      upstream:
        'bench/upstream-server.ts: 16 completion tokens; chat streams are 16 content events, finish, usage, [DONE]; Messages streams are message_start, content_block_start, 16 text deltas, content_block_stop, message_delta, message_stop',
    },
  };
  // Rounds: every target is measured once per round, so that a slow spell of the machine hits all
  // of them alike; a target's figure is its median round, a ratio the median of its per-round ratios.
  type Mode = 'json' | 'stream' | 'one_connection';
  const samples: Record<string, Partial<Record<Mode, Measured[]>>> = {};
  /** Requests each target was answered, warm-ups included, and the most its wrk runs left in flight: the traced gateway's spans are per these. */
  const sent: Record<string, number> = {};
  const inFlight: Record<string, number> = {};
  const measure = async (target: Target, mode: Mode, request: WrkRequest, connections: number, seconds: number) => {
    const cpuBefore = target.pid ? cpuSeconds(target.pid) : 0;
    const redisBefore = target.usesRedis ? cpuSeconds(redis.pid!) : 0;
    const haltsBefore = pinned ? [coreHalts(0), coreHalts(1)] : [];
    const measured = await wrk(request, { connections, seconds });
    sent[target.key] = (sent[target.key] ?? 0) + measured.requests;
    inFlight[target.key] = (inFlight[target.key] ?? 0) + connections;
    const haltsAfter = pinned ? [coreHalts(0), coreHalts(1)] : [];
    const haltsPerRequest = (core: number) => {
      const [before, after] = [haltsBefore[core], haltsAfter[core]];
      return before === undefined || after === undefined ? undefined : Number(((after - before) / measured.requests).toFixed(3));
    };
    const perRequest = (before: number, pid: number) => Math.round(((cpuSeconds(pid) - before) * 1e6) / measured.requests);
    const sample: Measured = target.pid ? { ...measured, cpu_us_per_request: perRequest(cpuBefore, target.pid) } : measured;
    if (target.usesRedis) sample.redis_cpu_us_per_request = perRequest(redisBefore, redis.pid!);
    // The cores' halts while the proxy under test had core 1 (the upstream row has none pinned).
    if (target.pid && haltsPerRequest(1) !== undefined) {
      sample.core_halts_per_request = haltsPerRequest(1);
      sample.load_core_halts_per_request = haltsPerRequest(0);
    }
    ((samples[target.key] ??= {})[mode] ??= []).push(sample);
    console.log(`${target.name}: ${mode} ${JSON.stringify(sample)}`);
    if (sample.errors > 0) await showOne(request);
  };
  /** A target's measures in a round: [mode, request, connections, seconds]. */
  const planOf = (target: Target): Array<[Mode, WrkRequest, number, number]> => {
    const runs: Array<['json' | 'stream', WrkRequest]> = target.get
      ? [['json', target.get]]
      : [
          ['json', target.chat!(false)],
          ['stream', target.chat!(true)],
        ];
    const plan: Array<[Mode, WrkRequest, number, number]> = [];
    if (PARTS.has('throughput')) {
      for (const [mode, request] of runs) {
        if (process.env.BENCH_MODES && !process.env.BENCH_MODES.split(',').includes(mode)) continue;
        plan.push([mode, request, CONNECTIONS, SECONDS]);
      }
    }
    if (PARTS.has('latency') && !target.get && !target.noLatency) plan.push(['one_connection', runs[0]![1], 1, Math.max(1, Math.round(SECONDS / 2))]);
    return plan;
  };
  // Every measure is warmed up once before the first round, not just before its own first
  // measure: targets that share a process (nova and its Messages routes) would otherwise meet a
  // gateway the warm-ups of the targets before them had heated further, which biases the first
  // round's same-round ratios against whichever target comes first.
  for (const target of targets) {
    for (const [, request, connections] of planOf(target)) {
      sent[target.key] = (sent[target.key] ?? 0) + (await wrk(request, { connections, seconds: WARM_UP_SECONDS })).requests;
      inFlight[target.key] = (inFlight[target.key] ?? 0) + connections;
    }
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const target of targets) for (const [mode, request, connections, seconds] of planOf(target)) await measure(target, mode, request, connections, seconds);
  }
  const median = <T>(values: T[], by: (value: T) => number): T | undefined => [...values].sort((a, b) => by(a) - by(b))[Math.floor((values.length - 1) / 2)];
  const figures: Record<string, Partial<Record<Mode, Measured & { rounds: number[] }>>> = {};
  for (const [key, modes] of Object.entries(samples)) {
    figures[key] = {};
    for (const [mode, list] of Object.entries(modes) as Array<[Mode, Measured[]]>) {
      const pick = mode === 'one_connection' ? median(list, (m) => m.p50_ms)! : median(list, (m) => m.rps)!;
      figures[key]![mode] = { ...pick, rounds: list.map((m) => (mode === 'one_connection' ? m.p50_ms : m.rps)) };
    }
  }
  /** a's figure / b's figure in each round (null when either was not measured): throughput, or CPU per request. */
  const roundRatios = (a: string, b: string, mode: 'json' | 'stream', of: (m: Measured) => number | undefined = (m) => m.rps): number[] | null => {
    const x = samples[a]?.[mode];
    const y = samples[b]?.[mode];
    if (!x || !y || x.length !== y.length) return null;
    const ratios = x.map((m, i) => [of(m), of(y[i]!)]).map(([p, q]) => (p === undefined || q === undefined || q === 0 ? NaN : Number((p / q).toFixed(3))));
    return ratios.some(Number.isNaN) ? null : ratios;
  };
  /** The median over rounds of a's figure / b's figure in the same round. */
  const roundRatio = (a: string, b: string, mode: 'json' | 'stream', of?: (m: Measured) => number | undefined): number | null => {
    const ratios = roundRatios(a, b, mode, of);
    return ratios === null ? null : Number(median(ratios, (r) => r)!.toFixed(2));
  };
  const cpuOf = (m: Measured) => m.cpu_us_per_request;
  const redisCpuOf = (m: Measured) => m.redis_cpu_us_per_request;
  // The Messages route against chat completions (`nova`), same rounds, each left out when either
  // was not measured: throughput (the acceptance), and CPU per request (above 1: the Messages route
  // costs more), steadier than throughput when a neighbour takes the proxy's core, which stops the
  // gateway's CPU clock but not wrk's. Every round's ratio is kept, to show the rounds' spread.
  // The key level against the project's alone likewise, and Redis's CPU per request too (the
  // key level's structures are written in the same script call).
  const sameRoundRatios: Record<string, number> = {};
  const roundRatiosOf: Record<string, number[]> = {};
  const throughputAndCpu = [['', undefined] as const, ['cpu_', cpuOf] as const];
  for (const [name, key, ofs] of [
    ['messages_vs_chat', 'nova_messages', throughputAndCpu],
    ['native_vs_chat', 'nova_messages_native', throughputAndCpu],
    ['key_vs_project', 'nova_key', [...throughputAndCpu, ['redis_cpu_', redisCpuOf] as const]],
    ['fleet_vs_single', 'nova_fleet', throughputAndCpu],
    ['traced_vs_untraced', 'nova_traced', throughputAndCpu],
  ] as const) {
    for (const mode of ['json', 'stream'] as const) {
      for (const [prefix, of] of ofs) {
        const ratios = roundRatios(key, 'nova', mode, of);
        if (ratios === null) continue;
        sameRoundRatios[`${prefix}${name}_${mode}`] = Number(median(ratios, (r) => r)!.toFixed(2));
        roundRatiosOf[`${prefix}${name}_${mode}`] = ratios;
      }
    }
  }
  results.round_ratios = roundRatiosOf;
  results.targets = figures;
  if (traced) {
    // Stopped first: at SIGTERM the gateway exports what its batch processor still holds (src/server.ts).
    await stopGateway(traced.gateway.child);
    results.tracing_sink = await traced.sinkFigures(sent.nova_traced ?? 0, inFlight.nova_traced ?? 0);
    console.log(`OTLP sink: ${JSON.stringify(results.tracing_sink)}`);
  }

  if (PARTS.has('held')) {
    // Each held stream holds two of the gateway's sockets (client and upstream).
    const streams = Math.min(Number(process.env.BENCH_HELD_STREAMS ?? 10_000), Math.floor((openFileLimit() - 256) / 2));
    // Each held run on a gateway of its own, started for it (same build, flags, pinning and config):
    // the memory a run adds is then not lessened by what an earlier run (or the throughput part) grew.
    const heldRun = async (model: string, queued: boolean) => {
      const fresh = await startGateway(upstreamPorts, redis.url);
      const headers = { authorization: `Bearer ${fresh.secret}` };
      try {
        return await holdStreams({
          held: { url: `${fresh.url}/v1/chat/completions`, headers, model },
          metricsUrl: fresh.metricsUrl,
          queued,
          probe: { gateway: { url: `${fresh.url}/v1/chat/completions`, headers }, direct: { url: `http://127.0.0.1:${upstreamPort}/fixed/v1/chat/completions` } },
          pid: fresh.child.pid!,
          streams,
          probes: Number(process.env.BENCH_PROBES ?? 200),
        });
      } finally {
        await stopGateway(fresh.child);
      }
    };
    const held = await heldRun('bench-held', false);
    results.held_streams = held;
    console.log(`held streams: ${JSON.stringify(held)}`);
    // The same number of requests to a model whose two targets take HELD_MAX_CONCURRENT each: the
    // rest wait in its queue. Per held request against the streams' own, same run.
    const queued = await heldRun('bench-queued', true);
    const ratio = (a: number, b: number) => (b > 0 ? Number((a / b).toFixed(2)) : null);
    results.held_streams_queued = {
      ...queued,
      max_concurrent_per_target: HELD_MAX_CONCURRENT,
      targets: 2,
      rss_per_held_vs_streams: ratio(queued.rss_per_held_kb, held.rss_per_held_kb),
      heap_per_held_vs_streams: ratio(queued.heap_per_held_kb, held.heap_per_held_kb),
    };
    results.open_file_limit = openFileLimit();
    console.log(`held through a queue: ${JSON.stringify(results.held_streams_queued)}`);
  }

  const cpuRatio = (key: string, base: string, mode: 'json' | 'stream') => {
    const [mine, theirs] = [figures[key]?.[mode]?.cpu_us_per_request, figures[base]?.[mode]?.cpu_us_per_request];
    return mine !== undefined && theirs !== undefined && theirs > 0 ? Number((mine / theirs).toFixed(3)) : null;
  };
  const upstreamP50 = figures.upstream?.one_connection?.p50_ms;
  results.against_targets = {
    json_vs_bare: roundRatio('nova', 'bare', 'json'),
    stream_vs_bare: roundRatio('nova', 'bare', 'stream'),
    // Side by side, not a target: what each proxy adds to the upstream's own p50 at one connection.
    added_p50_one_connection_ms: Object.fromEntries(
      ['nova', 'bare', 'nginx'].map((key) => {
        const p50 = figures[key]?.one_connection?.p50_ms;
        return [key, p50 !== undefined && upstreamP50 !== undefined ? Number((p50 - upstreamP50).toFixed(3)) : null];
      }),
    ),
    ...sameRoundRatios,
    ...(traced ? { traced_spans_per_request: (results.tracing_sink as { spans_per_request: number }).spans_per_request } : {}),
    store_true_vs_false_json: roundRatio('nova_store', 'nova', 'json'),
    store_true_vs_false_stream: roundRatio('nova_store', 'nova', 'stream'),
    ...(gatewayB
      ? {
          b_vs_nova_json: roundRatio('nova_b', 'nova', 'json'),
          b_vs_nova_stream: roundRatio('nova_b', 'nova', 'stream'),
          b_vs_nova_store_json: roundRatio('nova_b_store', 'nova_store', 'json'),
          b_vs_nova_store_stream: roundRatio('nova_b_store', 'nova_store', 'stream'),
          // CPU per request of this checkout against gateway B (the median rounds of each): above 1, this one costs more.
          cpu_nova_vs_b_json: cpuRatio('nova', 'nova_b', 'json'),
          cpu_nova_vs_b_stream: cpuRatio('nova', 'nova_b', 'stream'),
        }
      : {}),
    held_streams_rss_peak_mb: (results.held_streams as { rss_peak_mb?: number } | undefined)?.rss_peak_mb ?? null,
    held_streams_ttfb_added_p50_ms: (results.held_streams as { ttfb_added_p50_ms?: number } | undefined)?.ttfb_added_p50_ms ?? null,
  };

  const k = (n?: number) => (n === undefined ? '–' : `${(n / 1000).toFixed(2)}k`);
  const x = (ratio: number | null) => (ratio === null ? '' : ` (${ratio.toFixed(2)}x)`);
  const rows = [['target', 'JSON req/s', 'stream req/s', 'CPU µs/request (JSON, stream)', 'Redis CPU µs/request (JSON, stream)', 'p50 at 1 connection']];
  for (const target of targets) {
    const f = figures[target.key] ?? {};
    rows.push([
      target.name,
      `${k(f.json?.rps)}${target.key.startsWith('nova') ? x(roundRatio(target.key, 'bare', 'json')) : ''}`,
      `${k(f.stream?.rps)}${target.key.startsWith('nova') ? x(roundRatio(target.key, 'bare', 'stream')) : ''}`,
      f.json?.cpu_us_per_request !== undefined ? `${f.json.cpu_us_per_request}, ${f.stream?.cpu_us_per_request ?? '–'}` : '–',
      f.json?.redis_cpu_us_per_request !== undefined ? `${f.json.redis_cpu_us_per_request}, ${f.stream?.redis_cpu_us_per_request ?? '–'}` : '–',
      f.one_connection ? `${f.one_connection.p50_ms.toFixed(2)} ms` : '–',
    ]);
  }
  console.log(
    `\n${pinned ? 'Pinned: each proxy alone on core 1; wrk, upstream and Redis on core 0.' : 'Unpinned.'} Node ${NODE.version} under test, with npm start's flags (${START_FLAGS.join(' ') || 'none'}). ${CONNECTIONS} connections, ${SECONDS} s per measure, ${ROUNDS} rounds (median); (x) = against the bare proxy, median of the rounds' ratios.\n`,
  );
  console.log(table(rows));
  console.log(`\nagainst the targets: ${JSON.stringify(results.against_targets)}`);
  if (Object.keys(roundRatiosOf).length > 0) console.log(`same-round ratios, every round: ${JSON.stringify(roundRatiosOf)}`);

  const resultsDir = process.env.BENCH_RESULTS ?? join(ROOT, 'bench/results');
  mkdirSync(resultsDir, { recursive: true });
  const file = join(resultsDir, `bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  writeFileSync(file, `${JSON.stringify(results, null, 2)}\n`);
  console.log(`written: ${file}`);
  if (failures > 0) {
    console.log(`${failures} measure(s) had failed requests: their figures are not valid`);
    process.exitCode = 1;
  }

  await stopGateway(gateway.child);
  await redis.stop();
}

main()
  .catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const child of children) if (child.exitCode === null) child.kill('SIGTERM');
    await stopRedis();
  });
