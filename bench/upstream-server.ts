/**
 * The bench's upstream: a minimal OpenAI-compatible chat server on node:http with answers built once,
 * so that it costs far less per request than anything measured through it. It listens on two
 * ports (two origins, for a model with two equal targets: the `nova_fleet` target and the queued held
 * streams) and prints {"port": n, "ports": [n, m]}.
 *
 *   /fixed/v1/chat/completions  16 completion tokens at once: one JSON body, or (when the request
 *                               says "stream":true) 16 content events, a finish event, a usage event
 *                               and [DONE], each written separately as a token server writes them;
 *   /fixed/v1/messages          the same 16 tokens in Anthropic's Messages API, for the gateway's
 *                               native pass-through: one Message, or (stream) message_start with the
 *                               input usage, content_block_start, 16 text deltas, content_block_stop,
 *                               message_delta with the stop reason and output tokens, message_stop,
 *                               each written separately as the chat stream's events are;
 *   /held/v1/chat/completions   a slow stream: the first event at once, then one every
 *                               BENCH_HELD_INTERVAL_MS for BENCH_HELD_EVENTS events, then usage and [DONE].
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';

const TOKENS = 16;
const HELD_INTERVAL_MS = Number(process.env.BENCH_HELD_INTERVAL_MS ?? 1000);
const HELD_EVENTS = Number(process.env.BENCH_HELD_EVENTS ?? 20);
const created = Math.floor(Date.now() / 1000);
const words = Array.from({ length: TOKENS }, (_, n) => (n === 0 ? 'Token' : ` token${n}`));
const usage = { prompt_tokens: 12, completion_tokens: TOKENS, total_tokens: 12 + TOKENS };

const jsonBody = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created,
    model: 'bench-1',
    choices: [{ index: 0, message: { role: 'assistant', content: words.join('') }, finish_reason: 'stop' }],
    usage,
  }),
);
const event = (payload: unknown) => Buffer.from(`data: ${JSON.stringify(payload)}\n\n`);
const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
  event({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created, model: 'bench-1', choices: [{ index: 0, delta, finish_reason: finish }] });
const contentEvents = words.map((content, n) => chunk(n === 0 ? { role: 'assistant', content } : { content }));
const tailEvents = [
  chunk({}, 'stop'),
  event({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created, model: 'bench-1', choices: [], usage }),
  Buffer.from('data: [DONE]\n\n'),
];

// Anthropic's Messages API, the same answer (src/model-call/messages-call.ts passes it through as sent).
const messagesJsonBody = Buffer.from(
  JSON.stringify({
    id: 'msg_bench',
    type: 'message',
    role: 'assistant',
    model: 'bench-native',
    content: [{ type: 'text', text: words.join('') }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: usage.prompt_tokens, output_tokens: TOKENS },
  }),
);
const namedEvent = (payload: { type: string; [field: string]: unknown }) => Buffer.from(`event: ${payload.type}\ndata: ${JSON.stringify(payload)}\n\n`);
const messagesEvents = [
  namedEvent({
    type: 'message_start',
    message: {
      id: 'msg_bench',
      type: 'message',
      role: 'assistant',
      model: 'bench-native',
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: usage.prompt_tokens, output_tokens: 1 },
    },
  }),
  namedEvent({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
  ...words.map((text) => namedEvent({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } })),
  namedEvent({ type: 'content_block_stop', index: 0 }),
  namedEvent({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: TOKENS } }),
  namedEvent({ type: 'message_stop' }),
];

const heldEvent = chunk({ content: ' t' });
const sseHeaders = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };

/** Held streams tick together on one timer, not one timer each. */
const held = new Map<ServerResponse, number>();
setInterval(() => {
  for (const [response, sent] of held) {
    if (sent + 1 >= HELD_EVENTS) {
      held.delete(response);
      for (const tail of tailEvents) response.write(tail);
      response.end();
    } else {
      held.set(response, sent + 1);
      response.write(heldEvent);
    }
  }
}, HELD_INTERVAL_MS).unref();

const handler = (request: IncomingMessage, response: ServerResponse) => {
  const parts: Buffer[] = [];
  request.on('data', (part: Buffer) => parts.push(part));
  request.on('end', () => {
    const url = request.url ?? '';
    const messages = url.split('?', 1)[0] === '/fixed/v1/messages';
    if (request.method !== 'POST' || !(messages || url.endsWith('/chat/completions'))) {
      response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":{"message":"not found"}}');
      return;
    }
    const stream = Buffer.concat(parts).includes('"stream":true');
    if (messages) {
      if (stream) {
        response.writeHead(200, sseHeaders);
        for (const event of messagesEvents) response.write(event);
        response.end();
      } else {
        response.writeHead(200, { 'content-type': 'application/json', 'content-length': messagesJsonBody.length }).end(messagesJsonBody);
      }
    } else if (url.startsWith('/held/')) {
      response.writeHead(200, sseHeaders);
      response.write(contentEvents[0]);
      held.set(response, 1);
      response.on('close', () => held.delete(response));
    } else if (stream) {
      response.writeHead(200, sseHeaders);
      for (const content of contentEvents) response.write(content);
      for (const tail of tailEvents) response.write(tail);
      response.end();
    } else {
      response.writeHead(200, { 'content-type': 'application/json', 'content-length': jsonBody.length }).end(jsonBody);
    }
  });
};
/** Two listeners, one handler: two origins that cost the same, as two equal replicas would. */
const servers = [0, 1].map(() => {
  const server = createServer({ keepAliveTimeout: 60_000 }, handler);
  server.maxConnections = 0x7fffffff;
  return server;
});
const ports = await Promise.all(
  servers.map(
    (server) =>
      new Promise<number>((resolve) =>
        server.listen(0, '127.0.0.1', () => {
          const address = server.address();
          resolve(typeof address === 'object' && address ? address.port : 0);
        }),
      ),
  ),
);
process.stdout.write(`${JSON.stringify({ port: ports[0], ports })}\n`);
process.on('SIGTERM', () => {
  let open = servers.length;
  for (const server of servers) server.close(() => --open === 0 && process.exit(0));
});
