import { PassThrough, Writable, type WritableOptions } from 'node:stream';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { OPERATIONS, type OperationName, type TokenUsage } from '../../src/core/operations.js';
import { ByteToken } from '../../src/core/json-bytes.js';
import { parseEventData, SseRelay } from '../../src/model-call/sse-relay.js';
import { ChatTranscript } from '../../src/model-call/chat-transcript.js';

const chunk = (content: string, extra = '', model = 'm') =>
  `data: {"id":"c1","model":"${model}","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}}}]${extra}}\n\n`;
const USAGE = 'data: {"id":"c1","model":"m","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14}}\n\n';
const STREAM = `data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n${chunk('Hel')}${chunk('lo "quoted"\\n')}${chunk(' é✓')}${USAGE}data: [DONE]\n\n`;

interface RelayOptions {
  hide: boolean;
  splitEvery?: number;
  crlf?: boolean;
  publicModel?: string;
  operation?: OperationName;
  maxEventBytes?: number;
}

/** A relay writing into a PassThrough the test reads (the client's response in production). */
/** Options of a sink that records each write reaching it: one entry per call, a batch of buffered chunks being one writev. */
function recordingWrites(writes: string[][]): WritableOptions {
  return {
    writev(chunks, callback) {
      writes.push(chunks.map(({ chunk }) => String(chunk)));
      callback();
    },
    write(chunk, _encoding, callback) {
      writes.push([String(chunk)]);
      callback();
    },
  };
}

function makeRelay(options: RelayOptions & { onOversize?: () => void }, events: Buffer[] = []) {
  const sink = new PassThrough();
  const relay = new SseRelay(
    {
      operation: OPERATIONS[options.operation ?? 'chat'],
      hideUsage: options.hide,
      publicModel: options.publicModel === undefined ? null : ByteToken.quoted(options.publicModel),
      maxEventBytes: options.maxEventBytes ?? 1024 * 1024,
      onEvent: (event) => events.push(Buffer.from(event)),
      onOversize: options.onOversize,
    },
    sink,
  );
  return { relay, sink };
}

async function relay(input: string | Buffer, options: RelayOptions) {
  const events: Buffer[] = [];
  const { relay, sink } = makeRelay(options, events);
  let bytes = Buffer.isBuffer(input) ? input : Buffer.from(input);
  if (options.crlf) bytes = Buffer.from(bytes.toString('utf8').replace(/\n/g, '\r\n'));
  const out: Buffer[] = [];
  sink.on('data', (data: Buffer) => out.push(data));
  const done = new Promise((resolve) => sink.on('end', resolve));
  const step = options.splitEvery ?? bytes.length;
  for (let i = 0; i < bytes.length; i += step) relay.accept(bytes.subarray(i, i + step));
  relay.finish();
  await done;
  return { relay, text: Buffer.concat(out).toString('utf8'), events };
}

describe('SseRelay', () => {
  it.each([1, 3, 7, 64, 10_000])('passes events through unchanged whatever the chunking (%i bytes)', async (splitEvery) => {
    const { relay: r, text, events } = await relay(STREAM, { hide: false, splitEvery });
    expect(text).toBe(STREAM);
    expect(r.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
    expect(r.outputEvents).toBe(3);
    expect(r.completed).toBe(true);
    expect(events).toHaveLength(5); // every event but [DONE]
  });

  it('drops exactly the usage-only chunk when the client did not ask for usage', async () => {
    const { relay: r, text } = await relay(STREAM, { hide: true, splitEvery: 5 });
    expect(text).toBe(STREAM.replace(USAGE, ''));
    expect(r.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
  });

  it('drops a usage chunk of any framing shape (empty delta choices, as LiteLLM sends) and the "usage":null members', async () => {
    const litellm = 'data: {"id":"c1","model":"m","choices":[{"index":0,"delta":{},"finish_reason":null}],"usage":{"prompt_tokens":4,"completion_tokens":2}}\n\n';
    const input = `${chunk('a', ',"usage":null')}${litellm}data: [DONE]\n\n`;
    const { relay: r, text } = await relay(input, { hide: true, splitEvery: 9 });
    expect(text).toBe(`${chunk('a')}data: [DONE]\n\n`);
    expect(r.usage).toEqual({ prompt_tokens: 4, completion_tokens: 2 });
  });

  it('keeps the output of a chunk that also carries unasked usage, without the usage', async () => {
    const input = `${chunk('b', ',"usage":{"prompt_tokens":1,"completion_tokens":2}')}data: [DONE]\n\n`;
    const { relay: r, text } = await relay(input, { hide: true });
    const first = JSON.parse(text.split('\n\n')[0]!.slice(6)) as Record<string, unknown>;
    expect(first).toEqual({ id: 'c1', model: 'm', choices: [{ index: 0, delta: { content: 'b' } }] });
    expect(r.usage).toEqual({ prompt_tokens: 1, completion_tokens: 2 });
  });

  it('rewrites every event\'s model to the public id, and only the model key', async () => {
    const input = `${chunk('the "model":"x" text', '', 'upstream/name')}${USAGE}data: [DONE]\n\n`;
    const { text } = await relay(input, { hide: false, publicModel: 'public-1', splitEvery: 11 });
    expect(text).toBe(input.replaceAll('"model":"upstream/name"', '"model":"public-1"').replaceAll('"model":"m"', '"model":"public-1"'));
    expect(text).toContain(JSON.stringify('the "model":"x" text'));
    // A name as long as the public one but different is rewritten; the public one itself (also
    // with a non-ASCII name, compared as bytes) is kept as it is.
    for (const [upstream, publicModel] of [['public-2', 'public-1'], ['public-1', 'public-1'], ['modèle-1', 'modèle-2'], ['modèle-2', 'modèle-2']]) {
      const named = `${chunk('hi', '', upstream)}data: [DONE]\n\n`;
      const out = await relay(named, { hide: false, publicModel, splitEvery: 7 });
      expect(out.text).toBe(named.replace(`"model":"${upstream}"`, `"model":"${publicModel}"`));
    }
  });

  it('handles CRLF line endings', async () => {
    const { relay: r, text } = await relay(STREAM, { hide: true, splitEvery: 4, crlf: true });
    expect(text).toBe(STREAM.replace(USAGE, '').replace(/\n/g, '\r\n'));
    expect(r.outputEvents).toBe(3);
  });

  it.each([1, 2, 3])('finds CRLF blank lines split over chunks shorter than the blank line (%i bytes)', async (splitEvery) => {
    const { relay: r, text, events } = await relay(STREAM, { hide: true, splitEvery, crlf: true });
    expect(text).toBe(STREAM.replace(USAGE, '').replace(/\n/g, '\r\n'));
    expect(r.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
    expect(r.outputEvents).toBe(3);
    expect(r.completed).toBe(true);
    expect(events).toHaveLength(4); // every event but the hidden usage chunk and [DONE]
  });

  it('relays a CRLF event as soon as its blank line is complete, however it was split', async () => {
    const events: Buffer[] = [];
    const { relay: r, sink } = makeRelay({ hide: false }, events);
    const out: Buffer[] = [];
    sink.on('data', (data: Buffer) => out.push(data));
    const ended = new Promise((resolve) => sink.on('end', resolve));
    const event = chunk('a').replace('\n\n', '');
    r.accept(Buffer.from(`${event}\r`));
    r.accept(Buffer.from('\n\r'));
    // The CR ends the blank line (an LF may follow it or not): the event is complete.
    expect(events.map(String)).toEqual([`${event}\r\n\r`]);
    r.accept(Buffer.from('\n'));
    r.finish();
    await ended;
    expect(events).toHaveLength(1);
    expect(Buffer.concat(out).toString()).toBe(`${event}\r\n\r\n`);
  });

  it('accepts a CRLF event that fits the limit when it arrives a byte at a time', async () => {
    let oversized = 0;
    const event = `data: {"choices":[{"delta":{"content":"${'x'.repeat(960)}"}}]}\r\n\r\n`;
    const { relay: r, sink } = makeRelay({ hide: false, maxEventBytes: event.length, onOversize: () => oversized++ });
    const out: Buffer[] = [];
    sink.on('data', (data: Buffer) => out.push(data));
    const ended = new Promise((resolve) => sink.on('end', resolve));
    const bytes = Buffer.from(`${event}${event}data: [DONE]\r\n\r\n`);
    for (let i = 0; i < bytes.length; i++) r.accept(bytes.subarray(i, i + 1));
    r.finish();
    await ended;
    expect(oversized).toBe(0);
    expect(Buffer.concat(out).toString()).toBe(bytes.toString());
    expect(r.outputEvents).toBe(2);
  });

  describe('line endings: CRLF, LF and a lone CR, mixed as the standard allows', () => {
    /** STREAM's events, each line (the blank one too) ended by the next of `endings` in turn. */
    const encode = (endings: string[]) => {
      let next = 0;
      const events = STREAM.split(/(?<=\n\n)/).map((event) => event.replace(/\n/g, () => endings[next++ % endings.length]!));
      return { input: events.join(''), usage: events[4]! };
    };
    // No CR is followed by an LF of the next line end: that pair would be one CRLF.
    const styles = { cr: ['\r'], 'cr crlf lf': ['\r', '\r\n', '\n'], 'lf crlf': ['\n', '\r\n'], 'crlf lf cr': ['\r\n', '\n', '\r'] };

    it.each(Object.entries(styles).flatMap(([name, endings]) => [1, 2, 3, 5, 64, 10_000].map((splitEvery) => [name, splitEvery, endings] as const)))(
      '%s, in chunks of %i bytes: the same events, metering and bytes',
      async (_name, splitEvery, endings) => {
        const { input, usage } = encode(endings);
        const { relay: r, text, events } = await relay(input, { hide: false, splitEvery });
        expect(text).toBe(input);
        expect(r.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
        expect(r.outputEvents).toBe(3);
        expect(r.completed).toBe(true);
        expect(events.map(parseEventData)).toEqual(STREAM.split(/(?<=\n\n)/).slice(0, 5).map((event) => parseEventData(Buffer.from(event))));
        const transcript = new ChatTranscript();
        for (const event of events) transcript.onEvent(event);
        expect(transcript.message()).toEqual({ role: 'assistant', content: 'Hello "quoted"\\n é✓' });
        const hidden = await relay(input, { hide: true, splitEvery });
        expect(hidden.text).toBe(input.replace(usage, ''));
        expect(hidden.relay.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
      },
    );

    it('takes a lone CR at the end of a chunk for a line end at once, and an LF after it for the rest of that CRLF', () => {
      const events: Buffer[] = [];
      const { relay: r } = makeRelay({ hide: false }, events);
      const event = chunk('a').replace('\n\n', '');
      r.accept(Buffer.from(`${event}\r`));
      expect(events).toEqual([]);
      // A CR after a line end is a blank line, whatever follows it: the event is complete.
      r.accept(Buffer.from('\r'));
      expect(events.map(String)).toEqual([`${event}\r\r`]);
      // The LF completes the CRLF of that blank line: it is not a blank line of its own.
      r.accept(Buffer.from('\n'));
      r.accept(Buffer.from(`${event}\r`));
      r.accept(Buffer.from('\n'));
      expect(events).toHaveLength(1);
      r.accept(Buffer.from('\n'));
      expect(events.map(String)).toEqual([`${event}\r\r`, `${event}\r\n\n`]);
    });

    it('drops the LF after a dropped usage chunk that a lone CR ended, and forwards the one after a forwarded event', async () => {
      const usage = USAGE.replace('\n\n', '\r\r');
      const { relay: r, sink } = makeRelay({ hide: true });
      const out: Buffer[] = [];
      sink.on('data', (data: Buffer) => out.push(data));
      const ended = new Promise((resolve) => sink.on('end', resolve));
      for (const piece of [chunk('a').replace('\n\n', '\r\r'), '\n', usage, '\ndata: [DONE]\r\r', '\n']) r.accept(Buffer.from(piece));
      r.finish();
      await ended;
      expect(Buffer.concat(out).toString()).toBe(`${chunk('a').replace('\n\n', '\r\r\n')}data: [DONE]\r\r\n`);
      expect(r.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
      expect(r.completed).toBe(true);
    });

    it('reads the text of a conversation only from the data line: a lone CR ends it', () => {
      const transcript = new ChatTranscript();
      // The data is `{…}\nmore`, which is not JSON: no text, as with every event that does not parse.
      for (const event of [`${chunk('a').replace('\n\n', '\r')}data: more\n\n`, chunk('b').replace('\n\n', '\r\r'), chunk('c').replace('\n\n', '\r\n\n')]) {
        transcript.onEvent(Buffer.from(event));
      }
      expect(transcript.message()).toEqual({ role: 'assistant', content: 'bc' });
    });

    it('measures an event against the limit alike whether the LF of its last CRLF arrives with it or after it', async () => {
      const event = `data: {"choices":[{"delta":{"content":"${'x'.repeat(200)}"}}]}\r\r\n`;
      for (const maxEventBytes of [event.length - 2, event.length - 1, event.length]) {
        const outcomes = [];
        for (const pieces of [[event], [event.slice(0, -1), '\n']]) {
          let oversized = 0;
          const { relay: r, sink } = makeRelay({ hide: false, maxEventBytes, onOversize: () => oversized++ });
          sink.resume();
          const ended = new Promise((resolve) => sink.on('end', resolve));
          for (const piece of pieces) r.accept(Buffer.from(piece));
          r.finish();
          await ended;
          outcomes.push({ oversized, outputEvents: r.outputEvents });
        }
        expect(outcomes[1], `limit ${maxEventBytes}`).toEqual(outcomes[0]);
        expect(outcomes[0]!.oversized).toBe(maxEventBytes < event.length - 1 ? 1 : 0);
      }
    });

    it('knows [DONE] in an event of any size and framing, and only as the event\'s data', async () => {
      const comment = `: ${'keep-alive '.repeat(20)}`;
      const terminal = [
        'data: [DONE]\n\n',
        'data:[DONE]\r\n\r\n',
        'data: [DONE]\r\r',
        'data: [DONE] \n\n',
        `${comment}\nevent: done\nid: 7\ndata: [DONE]\n\n`,
        `${comment}\r\ndata: [DONE]\r\n\r\n`,
        `event: done\rdata: [DONE]\r${comment}\r\r`,
      ];
      for (const done of terminal) expect((await relay(`${chunk('a')}${done}`, { hide: false, splitEvery: 3 })).relay.completed, JSON.stringify(done)).toBe(true);
      const notTerminal = [chunk('[DONE]'), ': [DONE]\n\n', 'event: [DONE]\n\n', 'data: [DONE]x\n\n', 'data: [DONE]\ndata: more\n\n', 'data:  [DONE]\n\n', 'data\ndata: [DONE]\n\n'];
      for (const other of notTerminal) expect((await relay(`${chunk('a')}${other}`, { hide: false })).relay.completed, JSON.stringify(other)).toBe(false);
    });
  });

  it('does not mistake "usage" or "content" inside generated text for fields', async () => {
    const input = `${chunk('the \\"usage\\":{ field and \\"content\\":\\"x\\"')}data: [DONE]\n\n`;
    const { relay: r, text } = await relay(input, { hide: true });
    expect(text).toBe(input);
    expect(r.usage).toBeNull();
    expect(r.outputEvents).toBe(1);
  });

  it('reads Responses API usage from response.completed and knows it as the terminal event', async () => {
    const created = 'event: response.created\ndata: {"type":"response.created","response":{"id":"resp_1","model":"up","usage":null}}\n\n';
    const delta = 'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"Hi"}\n\n';
    const completed =
      'event: response.completed\ndata: {"type":"response.completed","response":{"id":"resp_1","model":"up","output":[],"usage":{"input_tokens":7,"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0}}}}\n\n';
    const { relay: r, text } = await relay(`${created}${delta}${delta}${completed}`, { hide: false, operation: 'responses', publicModel: 'pub', splitEvery: 13 });
    expect(r.usage).toEqual({ prompt_tokens: 7, completion_tokens: 5, reasoning_tokens: 0 });
    expect(r.outputEvents).toBe(2);
    expect(r.completed).toBe(true);
    expect(text).toBe(`${created}${delta}${delta}${completed}`.replaceAll('"model":"up"', '"model":"pub"'));
  });

  it('reads a Messages stream usage from message_start merged with the last message_delta, and only then', async () => {
    const start =
      'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"up","content":[],"usage":{"input_tokens":7,"cache_read_input_tokens":20,"cache_creation_input_tokens":3,"output_tokens":1}}}\n\n';
    const delta = 'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}\n\n';
    const end = 'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"input_tokens":null,"output_tokens":9}}\n\n';
    const stop = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';
    const whole = await relay(`${start}${delta}${end}${stop}`, { hide: false, operation: 'messages', publicModel: 'pub', splitEvery: 17 });
    expect(whole.relay.usage).toEqual({ prompt_tokens: 30, completion_tokens: 9, cached_prompt_tokens: 20, cache_write_tokens: 3 });
    expect(whole.relay.completed).toBe(true);
    expect(whole.text).toBe(`${start}${delta}${end}${stop}`.replace('"model":"up"', '"model":"pub"'));
    // Cut before message_delta: message_start's first output count is not the call's usage.
    const cut = await relay(`${start}${delta}`, { hide: false, operation: 'messages', publicModel: 'pub', splitEvery: 17 });
    expect(cut.relay.usage).toBeNull();
    expect(cut.relay.completed).toBe(false);
  });

  it('stops at an event larger than the limit, whether it arrives whole or in pieces', async () => {
    for (const splitEvery of [100, 1 << 20]) {
      let oversized: () => void = () => {};
      const oversize = new Promise<void>((resolve) => (oversized = resolve));
      const { relay: r, sink } = makeRelay({ hide: false, maxEventBytes: 2048, onOversize: () => oversized() });
      sink.on('data', () => undefined);
      const big = `data: {"choices":[{"delta":{"content":"${'x'.repeat(5000)}"}}]}\n\n`;
      const bytes = Buffer.from(`${chunk('a')}${big}`);
      for (let i = 0; i < bytes.length; i += splitEvery) r.accept(bytes.subarray(i, i + splitEvery));
      await oversize;
      r.endWith('data: {"error":{}}\n\n');
    }
  });

  it('relays the complete events before an oversized one, then the error event, whether they arrive together or apart', async () => {
    const big = `data: {"choices":[{"delta":{"content":"${'x'.repeat(3000)}"}}]}\n\n`;
    for (const together of [true, false]) {
      const events: Buffer[] = [];
      let oversized: () => void = () => {};
      const oversize = new Promise<void>((resolve) => (oversized = resolve));
      const { relay: r, sink } = makeRelay({ hide: false, maxEventBytes: 2048, onOversize: () => oversized() }, events);
      const out: Buffer[] = [];
      sink.on('data', (data: Buffer) => out.push(data));
      const ended = new Promise((resolve) => sink.on('end', resolve));
      const pieces = together ? [`${chunk('a')}${chunk('b')}${big}`] : [`${chunk('a')}${chunk('b')}`, big];
      for (const piece of pieces) r.accept(Buffer.from(piece));
      await oversize;
      r.endWith('data: {"error":{}}\n\n');
      await ended;
      expect(Buffer.concat(out).toString()).toBe(`${chunk('a')}${chunk('b')}data: {"error":{}}\n\n`);
      expect(r.outputEvents).toBe(2);
      expect(events).toHaveLength(2);
    }
  });

  it('pauses the upstream while the client reads slower than it writes, and relays everything once it reads', async () => {
    const source = new PassThrough();
    const { relay: r, sink } = makeRelay({ hide: false });
    r.relayFrom(source);
    const event = chunk('x'.repeat(1000));
    // 400 KB: several times what the streams buffer (Node 22's default high-water mark is 64 KiB).
    const events = 400;
    for (let i = 0; i < events; i++) source.write(event);
    source.end('data: [DONE]\n\n');
    await new Promise((resolve) => setImmediate(resolve));
    // Nobody reads the relay: past its buffer the upstream is paused, not drained into memory.
    expect(source.isPaused()).toBe(true);
    expect(sink.writableLength + sink.readableLength).toBeLessThan((events / 2) * event.length);
    const out: Buffer[] = [];
    sink.on('data', (data: Buffer) => out.push(data));
    await new Promise((resolve) => sink.on('end', resolve));
    expect(Buffer.concat(out).toString()).toBe(`${event.repeat(events)}data: [DONE]\n\n`);
    expect(r.completed).toBe(true);
  });

  it('writes what arrives within one event-loop turn, and the end, as one chunk in one write to the client', async () => {
    const writes: string[][] = [];
    const sink = new Writable(recordingWrites(writes));
    const r = new SseRelay({ operation: OPERATIONS.chat, hideUsage: false, publicModel: null, maxEventBytes: 1024 }, sink);
    const finished = new Promise((resolve) => sink.on('finish', resolve));
    r.accept(Buffer.from(chunk('a')));
    r.accept(Buffer.from(chunk('b')));
    expect(writes).toEqual([]);
    await new Promise((resolve) => setImmediate(resolve));
    // The next turn: its chunks and the end of the stream go together.
    r.accept(Buffer.from(chunk('c')));
    r.accept(Buffer.from('data: [DONE]\n\n'));
    r.finish();
    await finished;
    expect(writes).toEqual([[chunk('a') + chunk('b')], [`${chunk('c')}data: [DONE]\n\n`]]);
  });

  it('writes nothing at the end of the turn to a response that was destroyed meanwhile (the client left)', async () => {
    const sink = new PassThrough();
    let calls = 0;
    const write = sink.write.bind(sink) as (...args: unknown[]) => boolean;
    sink.write = ((...args: unknown[]) => (calls++, write(...args))) as typeof sink.write;
    const r = new SseRelay({ operation: OPERATIONS.chat, hideUsage: false, publicModel: null, maxEventBytes: 1024 }, sink);
    r.accept(Buffer.from(chunk('a')));
    sink.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toBe(0);
  });

  it('writes at once, without waiting for the end of the turn, what passes the response buffer', async () => {
    const writes: number[] = [];
    const sink = new Writable({
      highWaterMark: 4096,
      write(chunk: Buffer, _encoding, callback) {
        writes.push(chunk.length);
        callback();
      },
    });
    const r = new SseRelay({ operation: OPERATIONS.chat, hideUsage: false, publicModel: null, maxEventBytes: 1 << 20 }, sink);
    const event = chunk('x'.repeat(1000));
    for (let i = 0; i < 10; i++) r.accept(Buffer.from(event));
    // Four events pass 4 KiB: written in this turn, twice; the last two wait for the turn's end.
    expect(writes).toEqual([4 * event.length, 4 * event.length]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual([4 * event.length, 4 * event.length, 2 * event.length]);
  });

  it('keeps the last events of a stored stream for the end of the response, written together after the store', async () => {
    const writes: string[][] = [];
    // Ends the way an HTTP response does: the last chunk given to end(), then the chunked terminator.
    class Response extends Writable {
      override end(...args: unknown[]): this {
        const callback = typeof args.at(-1) === 'function' ? (args.pop() as () => void) : undefined;
        if (args[0] !== undefined) this.write(args[0]);
        this.write('TERM');
        return super.end(callback);
      }
    }
    const sink = new Response(recordingWrites(writes));
    let stored = false;
    const r = new SseRelay(
      {
        operation: OPERATIONS.chat,
        hideUsage: false,
        publicModel: null,
        maxEventBytes: 1024,
        beforeEnd: () => new Promise<void>((resolve) => setTimeout(() => ((stored = true), resolve()), 5)),
      },
      sink,
    );
    const finished = new Promise((resolve) => sink.on('finish', resolve));
    r.accept(Buffer.from(chunk('a')));
    r.accept(Buffer.from('data: [DONE]\n\n'));
    r.finish();
    await new Promise((resolve) => setImmediate(resolve));
    expect(writes).toEqual([]);
    await finished;
    expect(stored).toBe(true);
    expect(writes.flat()).toEqual([`${chunk('a')}data: [DONE]\n\n`, 'TERM']);
  });

  it('ends with an error event after a partial event was dropped', async () => {
    const { relay: r, sink } = makeRelay({ hide: true });
    const out: Buffer[] = [];
    sink.on('data', (data: Buffer) => out.push(data));
    const ended = new Promise((resolve) => sink.on('end', resolve));
    r.accept(Buffer.from(`${chunk('a')}data: {"id":"c1","cho`));
    r.endWith('data: {"error":{"code":"upstream_unavailable"}}\n\n');
    await ended;
    expect(Buffer.concat(out).toString()).toBe(`${chunk('a')}data: {"error":{"code":"upstream_unavailable"}}\n\n`);
  });
});

describe('parseEventData', () => {
  it('reads one-line events, CRLF events, named events and data split over several lines alike', () => {
    expect(parseEventData(Buffer.from('data: {"a":1}\n\n'))).toEqual({ a: 1 });
    expect(parseEventData(Buffer.from('data:{"a":2}\r\n\r\n'))).toEqual({ a: 2 });
    expect(parseEventData(Buffer.from('event: response.completed\ndata: {"a":3}\n\n'))).toEqual({ a: 3 });
    expect(parseEventData(Buffer.from(': keep-alive\r\ndata: {"a":\r\ndata: [4]}\r\n\r\n'))).toEqual({ a: [4] });
    expect(parseEventData(Buffer.from('data: [DONE]\n\n'))).toBeNull();
    expect(parseEventData(Buffer.from('data: [1,2]\n\n'))).toBeNull();
  });

  it('reads data lines ended by a lone CR, or by endings of several kinds', () => {
    expect(parseEventData(Buffer.from('data: {"a":1}\r\r'))).toEqual({ a: 1 });
    expect(parseEventData(Buffer.from(': c\rdata: {"a":\rdata: [2]}\r\r'))).toEqual({ a: [2] });
    expect(parseEventData(Buffer.from('data: {"a":\rdata: 3}\n\r\n'))).toEqual({ a: 3 });
  });
});

/** The data of each event a client dispatches from `text`, by the WHATWG parsing rules (event types and ids aside). */
function dispatched(text: string): string[] {
  const events: string[] = [];
  let data = '';
  // The piece after the last line end is a line not ended yet: not read.
  for (const line of text.split(/\r\n|\r|\n/).slice(0, -1)) {
    if (line === '') {
      if (data !== '') events.push(data.slice(0, -1));
      data = '';
    } else if (!line.startsWith(':')) {
      const colon = line.indexOf(':');
      const value = colon === -1 ? '' : line.slice(colon + (line[colon + 1] === ' ' ? 2 : 1));
      if ((colon === -1 ? line : line.slice(0, colon)) === 'data') data += `${value}\n`;
    }
  }
  return events;
}

interface GeneratedEvent {
  kind: 'content' | 'usage' | 'both' | 'done' | 'ping';
  /** The event's data as the client should read it: a JSON object (before any rewrite), `[DONE]`, or null (no data). */
  data: Record<string, unknown> | '[DONE]' | null;
  lines: string[];
}

const RELAY_LIMIT = 1 << 20;
/** An event the stream ends in: relayed, and metered as output (an early end is still metered), at the end. */
const UNFINISHED = 'data: {"id":"c1","choices":[{"delta":{"content":"unfinished';
const ending = fc.constantFrom('\n', '\r\n', '\r');
const contentText = fc.oneof(
  { weight: 8, arbitrary: fc.string({ unit: fc.oneof(fc.constantFrom('[DONE]', '"usage":{"prompt_tokens":1}', 'data: ', '\r', '\n', 'é', '✓'), fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })), maxLength: 8 }) },
  // Past the response's buffer (16 KiB), the event-loop batching and any short-event shortcut.
  { weight: 1, arbitrary: fc.integer({ min: 1000, max: 20_000 }).map((length) => 'x'.repeat(length)) },
);
const fieldLines = fc.array(fc.constantFrom(': ping', 'event: chunk', 'id: 12', 'retry: 3000', `: ${'keep-alive '.repeat(12)}`), { maxLength: 2 });

const generatedEvent: fc.Arbitrary<GeneratedEvent> = fc
  .record({
    kind: fc.constantFrom('content', 'content', 'content', 'usage', 'both', 'done', 'ping'),
    model: fc.constantFrom('m', 'upstream/name', 'modèle'),
    content: contentText,
    usageNull: fc.boolean(),
    tokens: fc.tuple(fc.nat(5000), fc.nat(5000)),
    // `data:` with or without its space, or the JSON over two data lines (the second starts with "choices":
    // a key at the start of a continuation line is not one the byte scanners recognise).
    style: fc.constantFrom('space', 'bare', 'split'),
    before: fieldLines,
    after: fc.array(fc.constant(': trailer'), { maxLength: 1 }),
    doneLine: fc.constantFrom('data: [DONE]', 'data:[DONE]', 'data: [DONE]  '),
  })
  .map(({ kind, model, content, usageNull, tokens, style, before, after, doneLine }) => {
    if (kind === 'ping') return { kind, data: null, lines: [...before, ': ping'] };
    if (kind === 'done') return { kind, data: '[DONE]', lines: [...before, doneLine, ...after] };
    const data: Record<string, unknown> = { id: 'c1', model, choices: kind === 'usage' ? [] : [{ index: 0, delta: { content: kind === 'both' ? `${content}.` : content } }] };
    if (kind !== 'content') data.usage = { prompt_tokens: tokens[0], completion_tokens: tokens[1] };
    else if (usageNull) data.usage = null;
    const json = JSON.stringify(data);
    const split = json.indexOf('"choices"');
    const dataLines = style === 'split' ? [`data: ${json.slice(0, split)}`, `data: ${json.slice(split)}`] : [`data:${style === 'space' ? ' ' : ''}${json}`];
    return { kind, data, lines: [...before, ...dataLines, ...after] };
  });

/**
 * A stream of events, its lines ended by one line end throughout (as upstreams write them) or each by
 * any of the three, with blank lines between events now and then and maybe an unfinished event at the end.
 */
const generatedStream = fc
  .record({
    style: fc.constantFrom('mixed', 'mixed', '\n', '\r\n', '\r'),
    events: fc.array(fc.record({ event: generatedEvent, endings: fc.array(ending, { minLength: 8, maxLength: 8 }), extraBlank: fc.boolean() }), { maxLength: 10 }),
    tail: fc.constantFrom('', UNFINISHED, 'data: {"id":"c1"}\r', ': ping\n'),
  })
  .map(({ style, events, tail }) => {
    let input = '';
    let previous = '';
    const line = (text: string, mixed: string) => {
      const end = style === 'mixed' ? mixed : style;
      // An LF right after a CR would join it into one CRLF: a blank line would be lost.
      const ended = text === '' && previous === '\r' && end === '\n' ? '\r\n' : end;
      input += text + ended;
      previous = ended;
    };
    for (const { event, endings, extraBlank } of events) {
      if (extraBlank) line('', endings[7]!);
      event.lines.forEach((text, index) => line(text, endings[index]!));
      line('', endings[6]!);
    }
    return { input: input + tail, events: events.map(({ event }) => event), unfinished: tail === UNFINISHED };
  });

/** Chunk boundaries: every byte, sorted random cuts, or fixed sizes. */
const cuts = fc.oneof(fc.constant('every byte' as const), fc.array(fc.nat(), { minLength: 1, maxLength: 12 }), fc.integer({ min: 2, max: 9 }));

function chunked(bytes: Buffer, boundaries: 'every byte' | number[] | number): Buffer[] {
  if (boundaries === 'every byte') return Array.from(bytes, (_, at) => bytes.subarray(at, at + 1));
  const points =
    typeof boundaries === 'number'
      ? Array.from({ length: Math.ceil(bytes.length / boundaries) }, (_, index) => index * boundaries)
      : [...new Set(boundaries.map((cut) => cut % (bytes.length + 1)))].sort((a, b) => a - b);
  const edges = [...new Set([0, ...points, bytes.length])].sort((a, b) => a - b);
  return edges.slice(1).map((end, index) => bytes.subarray(edges[index], end));
}

/** What a relay did with `chunks`: the client's bytes, its metering, and the data of the events it saw. */
async function relayChunks(chunks: Buffer[], options: { hide: boolean; publicModel: string | null; maxEventBytes: number }) {
  const out: Buffer[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      out.push(chunk);
      callback();
    },
  });
  const seen: Buffer[] = [];
  let oversized = 0;
  const relay = new SseRelay(
    {
      operation: OPERATIONS.chat,
      hideUsage: options.hide,
      publicModel: options.publicModel === null ? null : ByteToken.quoted(options.publicModel),
      maxEventBytes: options.maxEventBytes,
      onEvent: (event) => seen.push(Buffer.from(event)),
      onOversize: () => oversized++,
    },
    sink,
  );
  const finished = new Promise((resolve) => sink.on('finish', resolve));
  for (const chunk of chunks) relay.accept(chunk);
  relay.finish();
  await finished;
  await Promise.resolve();
  return {
    output: Buffer.concat(out),
    usage: relay.usage,
    outputEvents: relay.outputEvents,
    completed: relay.completed,
    oversized,
    events: seen.flatMap((event) => dispatched(event.toString('utf8'))),
  };
}

/** The event data a client reads from the relay: the upstream's, with unasked usage hidden and the model renamed. */
function expectedData(events: GeneratedEvent[], hide: boolean, publicModel: string | null): unknown[] {
  return events.flatMap(({ kind, data }): unknown[] => {
    if (data === null || data === '[DONE]') return data === null ? [] : [data];
    if (hide && kind === 'usage') return [];
    const copy = structuredClone(data);
    if (hide) delete copy.usage;
    if (publicModel !== null) copy.model = publicModel;
    return [copy];
  });
}

describe('SseRelay properties', () => {
  it('relays any stream, in any line endings and chunks, as it relays the stream in one chunk, and as a client reads it', async () => {
    await fc.assert(
      fc.asyncProperty(
        generatedStream,
        fc.array(cuts, { minLength: 2, maxLength: 2 }),
        fc.boolean(),
        fc.constantFrom(null, 'public-1', 'm'),
        fc.oneof({ weight: 3, arbitrary: fc.constant(RELAY_LIMIT) }, fc.integer({ min: 100, max: 5000 })),
        async ({ input, events, unfinished }, [first, second], hide, publicModel, maxEventBytes) => {
          const bytes = Buffer.from(input);
          const options = { hide, publicModel, maxEventBytes };
          const whole = await relayChunks([bytes], options);
          for (const boundaries of ['every byte' as const, first!, second!]) {
            const split = await relayChunks(chunked(bytes, boundaries), options);
            expect(split.output.toString('latin1')).toBe(whole.output.toString('latin1'));
            expect({ ...split, output: null }).toEqual({ ...whole, output: null });
          }
          if (maxEventBytes !== RELAY_LIMIT) return;
          // The stream in one chunk, against the events generated.
          expect(whole.oversized).toBe(0);
          const client = dispatched(whole.output.toString('utf8')).map((data) => (data.trimEnd() === '[DONE]' ? '[DONE]' : JSON.parse(data)));
          expect(client).toEqual(expectedData(events, hide, publicModel));
          if (!hide && publicModel === null) expect(whole.output.toString('utf8')).toBe(input);
          // onEvent sees what the client gets, but for [DONE].
          expect(whole.events.map((data) => JSON.parse(data))).toEqual(client.filter((data) => data !== '[DONE]'));
          const metered = events.filter(({ kind }) => kind === 'usage' || kind === 'both').at(-1)?.data as { usage: TokenUsage } | undefined;
          expect(whole.usage).toEqual(metered?.usage ?? null);
          const withText = events.filter(({ kind, data }) => (kind === 'content' || kind === 'both') && (data as { choices: [{ delta: { content: string } }] }).choices[0].delta.content !== '');
          expect(whole.outputEvents).toBe(withText.length + (unfinished ? 1 : 0));
          expect(whole.completed).toBe(events.some(({ kind }) => kind === 'done'));
        },
      ),
      { numRuns: 100 },
    );
  });
});
