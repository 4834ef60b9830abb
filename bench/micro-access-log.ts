/**
 * The access line of one chat completion, timed alone (the onResponse hook of src/http/access-log.ts):
 *
 *   taskset -c 1 npx tsx bench/micro-access-log.ts
 *
 * The request is a real one of a Fastify app set up as the gateway sets up its own (its logger, the
 * request id as `request_id`, fastify's own request lines off); inside its handler, the access-log
 * hook runs BENCH_REQUESTS (100000) times on it with the fields a chat completion adds, into a
 * destination that only counts bytes. Prints the median of BENCH_ROUNDS (9) rounds, in µs of CPU
 * time per line.
 */
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type onResponseHookHandler } from 'fastify';
import type { DestinationStream } from 'pino';
import { installAccessLog } from '../src/http/access-log.js';
import { createLogger } from '../src/core/logger.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 100_000);

let bytes = 0;
const sink: DestinationStream = { write: (line: string) => void (bytes += line.length) };
const app = Fastify({
  loggerInstance: createLogger('info', sink) as FastifyBaseLogger,
  logController: new LogController({ requestIdLogLabel: 'request_id', disableRequestLogging: true }),
});
installAccessLog(app);
app.decorateRequest('principal', null);

// The hook itself, to run it many times on one request.
let hook: onResponseHookHandler | undefined;
installAccessLog({ decorateRequest() {}, addHook: (_name: string, handler: onResponseHookHandler) => (hook = handler) } as unknown as FastifyInstance);

/** What src/model-call/model-call.ts adds to the line of a chat completion. */
const fields = {
  model: 'gpt-4o-mini',
  operation: 'chat',
  stream: false,
  upstream: 'api.example.com',
  target_index: 0,
  prompt_tokens: 200,
  completion_tokens: 100,
  outcome: 'completed',
  conversation_id: null,
};

let sample = '';
app.post('/v1/chat/completions', async (request, reply) => {
  request.principal = { projectId: 'proj_000000000000000000000001' } as typeof request.principal;
  const line = () => {
    request.accessLogged = false;
    request.logFields = fields;
    hook!.call(app, request, reply, () => {});
  };
  for (let i = 0; i < REQUESTS; i++) line(); // warm-up
  const perLine: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    // CPU time, not wall time: a core shared with other work stretches the wall clock, not this.
    const start = process.cpuUsage();
    for (let i = 0; i < REQUESTS; i++) line();
    const used = process.cpuUsage(start);
    perLine.push((used.user + used.system) / REQUESTS);
  }
  perLine.sort((a, b) => a - b);
  const before = bytes;
  sink.write = (written: string) => void ((sample = written), (bytes += written.length));
  line();
  console.log(
    `access line ${perLine[Math.floor(ROUNDS / 2)]!.toFixed(3)} µs (min ${perLine[0]!.toFixed(3)}, max ${perLine[ROUNDS - 1]!.toFixed(3)}; ` +
      `${ROUNDS} rounds of ${REQUESTS}); ${bytes - before} bytes:`,
  );
  return { ok: true };
});
await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'x-request-id': 'req-bench-1' }, payload: {} });
console.log(sample.trimEnd());
await app.close();
