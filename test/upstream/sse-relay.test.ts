import { describe, expect, it } from 'vitest';
import { SseRelay } from '../../src/upstream/sse-relay.js';

const chunk = (content: string, usage = '') => `data: {"id":"c1","choices":[{"index":0,"delta":{"content":${JSON.stringify(content)}}}]${usage}}\n\n`;
const USAGE = 'data: {"id":"c1","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":3,"total_tokens":14}}\n\n';
const STREAM = `data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n${chunk('Hel')}${chunk('lo "quoted"\\n')}${chunk(' é✓')}${USAGE}data: [DONE]\n\n`;

async function relay(input: string | Buffer, options: { hide: boolean; splitEvery?: number; crlf?: boolean }) {
  const relay = new SseRelay({ hideUsageChunk: options.hide, captureContent: true });
  let bytes = Buffer.isBuffer(input) ? input : Buffer.from(input);
  if (options.crlf) bytes = Buffer.from(bytes.toString('utf8').replace(/\n/g, '\r\n'));
  const out: Buffer[] = [];
  relay.on('data', (data: Buffer) => out.push(data));
  const done = new Promise((resolve) => relay.on('end', resolve));
  const step = options.splitEvery ?? bytes.length;
  for (let i = 0; i < bytes.length; i += step) relay.write(bytes.subarray(i, i + step));
  relay.end();
  await done;
  return { relay, text: Buffer.concat(out).toString('utf8') };
}

describe('SseRelay', () => {
  it.each([1, 3, 7, 64, 10_000])('passes events through unchanged whatever the chunking (%i bytes)', async (splitEvery) => {
    const { relay: r, text } = await relay(STREAM, { hide: false, splitEvery });
    expect(text).toBe(STREAM);
    expect(r.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
    expect(r.contentEvents).toBe(3);
    expect(r.content).toBe('Hello "quoted"\\n é✓');
    expect(r.sawDone).toBe(true);
  });

  it('drops exactly the usage-only chunk when asked to', async () => {
    const { relay: r, text } = await relay(STREAM, { hide: true, splitEvery: 5 });
    expect(text).toBe(STREAM.replace(USAGE, ''));
    expect(r.usage).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
  });

  it('keeps `"usage":null` chunks (and a usage that rides on a content chunk)', async () => {
    const input = `${chunk('a', ',"usage":null')}${chunk('b', ',"usage":{"prompt_tokens":1,"completion_tokens":2}')}data: [DONE]\n\n`;
    const { relay: r, text } = await relay(input, { hide: true });
    expect(text).toBe(input);
    expect(r.usage).toEqual({ prompt_tokens: 1, completion_tokens: 2 });
  });

  it('handles CRLF line endings', async () => {
    const { relay: r, text } = await relay(STREAM, { hide: true, splitEvery: 4, crlf: true });
    expect(text).toBe(STREAM.replace(USAGE, '').replace(/\n/g, '\r\n'));
    expect(r.contentEvents).toBe(3);
  });

  it('does not mistake "usage" or "content" inside generated text for fields', async () => {
    const input = `${chunk('the \\"usage\\":{ field and \\"content\\":\\"x\\"')}data: [DONE]\n\n`;
    const { relay: r, text } = await relay(input, { hide: true });
    expect(text).toBe(input);
    expect(r.usage).toBeNull();
    expect(r.contentEvents).toBe(1);
  });

  it('ends with an error event after a partial event was dropped', async () => {
    const r = new SseRelay({ hideUsageChunk: true, captureContent: false });
    const out: Buffer[] = [];
    r.on('data', (data: Buffer) => out.push(data));
    const ended = new Promise((resolve) => r.on('end', resolve));
    r.write(Buffer.from(`${chunk('a')}data: {"id":"c1","cho`));
    r.endWith('data: {"error":{"code":"upstream_unavailable"}}\n\n');
    await ended;
    expect(Buffer.concat(out).toString()).toBe(`${chunk('a')}data: {"error":{"code":"upstream_unavailable"}}\n\n`);
  });
});
