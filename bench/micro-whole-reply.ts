/**
 * How a model call's JSON reply is read, timed alone against a loopback upstream:
 *
 *   taskset -c 1 npx tsx bench/micro-whole-reply.ts
 *
 * The upstream (a node:http server answering every POST with a ~1 KB JSON body) runs in a child
 * process on core 0 (BENCH_SERVER_CPU); this process, the client, is the one measured. Variants,
 * alternated round by round so drift hits each alike:
 *
 *   handler  sendWhole (src/model-call/whole-reply.ts): undici's public handler API
 *            (onRequestStart/onResponseStart/onResponseData/onResponseEnd/onResponseError)
 *   legacy   the same handler on the legacy API undici 8 removed (onConnect/onHeaders/onData/
 *            onComplete/onError), as whole-reply.ts had it; delete this variant with undici 8
 *   request  pool.request() and its Readable body, read by readBounded (src/model-call/upstream-call.ts)
 *
 * One request at a time over one keep-alive connection (Pool, pipelining 1, as the gateway's), or
 * BENCH_CONCURRENCY at a time over as many connections (fewer wake-ups per request: on a busy
 * VM a wake-up costs more than the code measured). BENCH_SERVER=inprocess runs the upstream in
 * this process instead (its work, the same for every variant, is then in the figures too; nothing
 * waits on another process, which on a busy machine makes the differences steadier).
 * A round runs BENCH_REQUESTS (2000) requests of each variant, one variant after the other;
 * BENCH_ROUNDS (10) rounds. Prints, per variant, the median over the rounds of this process's CPU
 * time and of wall time, in µs per request, and the median and mean (± its standard error) of
 * each round's difference from the first variant (blocks run side by side in time, so the
 * difference is steadier than the medians on a busy machine: there, many short rounds).
 */
import { spawn } from 'node:child_process';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { Pool, util, type Dispatcher } from 'undici';
import { upstreamError } from '../src/http/errors.js';
import { CallSignal } from '../src/model-call/call-signal.js';
import { readBounded } from '../src/model-call/upstream-call.js';
import { sendWhole, type WholeResponse } from '../src/model-call/whole-reply.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 2_000);
const SERVER_CPU = process.env.BENCH_SERVER_CPU ?? '0';
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 1);
const IN_PROCESS = process.env.BENCH_SERVER === 'inprocess';
const LIMIT = 32 * 1024 * 1024;

const REPLY = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1,
    model: 'bench-1',
    choices: [{ index: 0, message: { role: 'assistant', content: 'x'.repeat(760) }, finish_reason: 'stop' }],
    usage: { prompt_tokens: 12, completion_tokens: 16, total_tokens: 28 },
  }),
);

/** The upstream: every request answered with REPLY. */
function serve(): Promise<Server> {
  const headers = { 'content-type': 'application/json', 'content-length': String(REPLY.length) };
  const server = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      response.writeHead(200, headers);
      response.end(REPLY);
    });
  });
  server.keepAliveTimeout = 60_000;
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/** The handler whole-reply.ts had, on undici's legacy handler API (for comparison only). */
class LegacyHandler {
  private abortCall: ((reason: Error) => void) | null = null;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private answered = false;
  private settleWhole!: { resolve: (bytes: Buffer) => void; reject: (error: unknown) => void };
  private readonly whole: Promise<Buffer>;
  private readonly onAbort = () => this.abortCall?.(this.signal.reason as Error);

  constructor(
    private readonly signal: CallSignal,
    private readonly limit: number,
    private readonly resolve: (response: WholeResponse) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.whole = new Promise<Buffer>((resolveWhole, rejectWhole) => (this.settleWhole = { resolve: resolveWhole, reject: rejectWhole }));
    this.whole.catch(() => undefined);
    signal.once('abort', this.onAbort);
  }

  onConnect(abort: (reason?: Error) => void): void {
    this.abortCall = abort;
    if (this.signal.aborted) abort(this.signal.reason as Error);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[]): boolean {
    if (statusCode < 200) return true;
    this.answered = true;
    const whole = this.whole;
    this.resolve({
      status: statusCode,
      headers: util.parseHeaders(rawHeaders) as IncomingHttpHeaders,
      whole,
      get body() {
        return Readable.from(
          (async function* () {
            yield await whole;
          })(),
        );
      },
    });
    return true;
  }

  onData(chunk: Buffer): boolean {
    this.size += chunk.length;
    if (this.size > this.limit) {
      this.abortCall?.(upstreamError(`The model backend sent a reply larger than the gateway accepts (${this.limit} bytes).`));
      return false;
    }
    this.chunks.push(chunk);
    return true;
  }

  onComplete(): void {
    this.signal.off('abort', this.onAbort);
    this.settleWhole.resolve(this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.size));
  }

  onError(error: Error): void {
    this.signal.off('abort', this.onAbort);
    if (this.answered) this.settleWhole.reject(error);
    else this.reject(error);
  }
}

function sendLegacy(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions, signal: CallSignal, limit: number): Promise<WholeResponse> {
  return new Promise<WholeResponse>((resolve, reject) => {
    dispatcher.dispatch(options, new LegacyHandler(signal, limit, resolve, reject) as unknown as Dispatcher.DispatchHandler);
  });
}

const requestBody = JSON.stringify({ model: 'bench-1', messages: [{ role: 'user', content: 'Say something about the weather in a few words.' }], max_tokens: 16 });

function dispatchOptions(): Dispatcher.DispatchOptions {
  return {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { accept: 'application/json', 'x-request-id': 'req-bench', 'content-type': 'application/json' },
    body: requestBody,
    headersTimeout: 60_000,
    bodyTimeout: 60_000,
  };
}

/** The upstream's port: in this process (BENCH_SERVER=inprocess), or in a child on its own core. */
async function startServer(): Promise<{ port: number; stop: () => void }> {
  if (IN_PROCESS) {
    const server = await serve();
    return { port: (server.address() as AddressInfo).port, stop: () => server.close() };
  }
  const child = spawn('taskset', ['-c', SERVER_CPU, process.execPath, ...process.execArgv, process.argv[1]!], {
    env: { ...process.env, BENCH_ROLE: 'server' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve) => child.stdout.once('data', (data: Buffer) => resolve(Number(data.toString()))));
  return { port, stop: () => child.kill() };
}

type Variant = (pool: Pool) => Promise<number>;

const variants: Record<string, Variant> = {
  handler: async (pool) => {
    const response = await sendWhole(pool, dispatchOptions(), new CallSignal(), LIMIT);
    return (await response.whole).length;
  },
  legacy: async (pool) => {
    const response = await sendLegacy(pool, dispatchOptions(), new CallSignal(), LIMIT);
    return (await response.whole).length;
  },
  request: async (pool) => {
    const response = await pool.request({ ...dispatchOptions(), signal: new CallSignal() });
    return (await readBounded(response.body, LIMIT)).length;
  },
};

async function round(pool: Pool, variant: Variant, bytes: number): Promise<{ cpu: number; wall: number }> {
  const cpu0 = process.cpuUsage();
  const wall0 = process.hrtime.bigint();
  let next = 0;
  const worker = async () => {
    while (next++ < REQUESTS) if ((await variant(pool)) !== bytes) throw new Error('short reply');
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const wall = Number(process.hrtime.bigint() - wall0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  return { cpu: (cpu.user + cpu.system) / REQUESTS, wall: wall / REQUESTS };
}

/** The mean and its standard error, "m ± e". */
function meanAndError(values: number[]): string {
  const mean = values.reduce((sum, value) => sum + value, 0) / values.length;
  const variance = values.reduce((sum, value) => sum + (value - mean) ** 2, 0) / Math.max(1, values.length - 1);
  return `${mean.toFixed(2)} ± ${Math.sqrt(variance / values.length).toFixed(2)}`;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main(): Promise<void> {
  const { port, stop } = await startServer();
  const bytes = REPLY.length;
  const pool = new Pool(`http://127.0.0.1:${port}`, { pipelining: 1, keepAliveTimeout: 60_000 });
  const names = (process.env.BENCH_VARIANTS ?? Object.keys(variants).join(',')).split(',');
  const results: Record<string, { cpu: number[]; wall: number[] }> = {};
  try {
    for (const name of names) {
      results[name] = { cpu: [], wall: [] };
      await round(pool, variants[name]!, bytes); // warm-up
    }
    for (let r = 0; r < ROUNDS; r++) {
      // Each round starts with another variant, so none always runs first.
      for (let k = 0; k < names.length; k++) {
        const name = names[(r + k) % names.length]!;
        const { cpu, wall } = await round(pool, variants[name]!, bytes);
        results[name]!.cpu.push(cpu);
        results[name]!.wall.push(wall);
      }
    }
  } finally {
    await pool.close();
    stop();
  }
  console.log(`${REQUESTS} requests x ${ROUNDS} rounds, ${CONCURRENCY} at a time, reply ${bytes} bytes; µs per request (median, then min-max over rounds)`);
  const base = results[names[0]!]!;
  const range = (values: number[]) => `${Math.min(...values).toFixed(1)}..${Math.max(...values).toFixed(1)}`;
  const fixed = (value: number) => value.toFixed(2).padStart(7);
  for (const name of names) {
    const { cpu, wall } = results[name]!;
    const cpuDiff = cpu.map((value, r) => value - base.cpu[r]!);
    const wallDiff = wall.map((value, r) => value - base.wall[r]!);
    console.log(
      `${name.padEnd(8)} cpu ${fixed(median(cpu))} (${range(cpu)})  wall ${fixed(median(wall))} (${range(wall)})` +
        `  vs ${names[0]}: cpu ${fixed(median(cpuDiff))}, mean ${meanAndError(cpuDiff)}  wall ${fixed(median(wallDiff))}`,
    );
  }
}

if (process.env.BENCH_ROLE === 'server') process.stdout.write(`${((await serve()).address() as AddressInfo).port}\n`);
else await main();
