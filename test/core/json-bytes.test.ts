import { describe, expect, it } from 'vitest';
import { ByteToken, findKey, firstStringValue, holds, latin1, lastObjectValue, removeNullMembers, replaceStringValue } from '../../src/core/json-bytes.js';

const MODEL = ByteToken.quoted('model');
const USAGE = ByteToken.quoted('usage');
const bytes = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

describe('json-bytes', () => {
  it('finds a quoted token only where its quote stands, not where its text ends another word', () => {
    const text = latin1(bytes('{"xmodel":1,"note":"a model","model":"m"}'));
    expect(MODEL.indexIn(text)).toBe(text.indexOf('"model":'));
    expect(MODEL.indexIn(text, text.indexOf('"model":') + 1)).toBe(-1);
    expect(MODEL.lastIndexIn(text)).toBe(text.indexOf('"model":'));
    expect(holds(latin1(bytes('{"xusage":1,"usage_total":2}')), USAGE)).toBe(false);
    expect(holds(latin1(bytes('{"a":1,"usage":null}')), USAGE)).toBe(true);
    expect(holds(latin1(bytes('data: [DONE]\n\n')), ByteToken.of('[DONE]'))).toBe(true);
  });

  it('takes a key only where a key can stand: not inside a string, not a suffix of another key', () => {
    const source = bytes({ messages: 'say "model": "x"', amodel: 'y', nested: { model: 'inner' }, model: 'outer' });
    const text = latin1(source);
    const found = findKey(text, MODEL)!;
    expect(text.slice(found.keyStart, found.valueStart)).toBe('"model":');
    expect(firstStringValue(source, MODEL)).toBe('inner');
    expect(findKey(text, MODEL, found.valueStart)!.valueStart).toBe(text.lastIndexOf('"outer"'));
    // An escaped quote before the name is text, not a key.
    expect(findKey(latin1(bytes('{"a":"\\"model\\": 1"}')), MODEL)).toBeNull();
  });

  it('reads the last usage object and rewrites the model in place, with multi-byte text before them', () => {
    const source = bytes({ note: 'é✓ "usage":{"prompt_tokens":9}', usage: { prompt_tokens: 11, completion_tokens: 3 }, model: 'upstream-name' });
    expect(lastObjectValue(source, USAGE)).toEqual({ prompt_tokens: 11, completion_tokens: 3 });
    const renamed = replaceStringValue(source, MODEL, ByteToken.quoted('public-é'));
    expect(JSON.parse(renamed.toString('utf8'))).toEqual({
      note: 'é✓ "usage":{"prompt_tokens":9}',
      usage: { prompt_tokens: 11, completion_tokens: 3 },
      model: 'public-é',
    });
    const same = bytes({ model: 'public' });
    expect(replaceStringValue(same, MODEL, ByteToken.quoted('public'))).toBe(same);
    expect(replaceStringValue(bytes({ model: 5 }), MODEL, ByteToken.quoted('public')).toString()).toBe('{"model":5}');
  });

  it('removes every usage: null member with its comma, first, middle and last', () => {
    const out = removeNullMembers(bytes('{"usage":null,"a":{"b":1, "usage" : null},"c":"\\"usage\\":null","usage":null}'), USAGE);
    expect(JSON.parse(out.toString())).toEqual({ a: { b: 1 }, c: '"usage":null' });
    const kept = bytes({ usage: { prompt_tokens: 1 } });
    expect(removeNullMembers(kept, USAGE)).toBe(kept);
  });

  it('removes runs of usage: null members whose commas the one before took, and many of them in one event', () => {
    const cases: Array<[string, unknown]> = [
      ['{"usage":null,"usage":null,"b":2}', { b: 2 }],
      ['{"usage":null, "usage" :null}', {}],
      ['{"a":1,"usage":null,"usage":null,"b":2}', { a: 1, b: 2 }],
      ['[{"usage":null},{"x":[1],"usage":null,"usage":{"p":1}}]', [{}, { x: [1], usage: { p: 1 } }]],
    ];
    for (const [source, expected] of cases) expect(JSON.parse(removeNullMembers(bytes(source), USAGE).toString()), source).toEqual(expected);
    const many = `[${Array.from({ length: 10_000 }, (_, i) => `{"usage":null,"i":${i},"usage":null}`).join(',')}]`;
    const out = JSON.parse(removeNullMembers(bytes(many), USAGE).toString()) as Array<{ i: number }>;
    expect(out).toHaveLength(10_000);
    expect(out.every((item, i) => Object.keys(item).length === 1 && item.i === i)).toBe(true);
  });
});
