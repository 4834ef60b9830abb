import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ByteToken, compositeEnd, findKey, firstStringValue, holds, latin1, lastObjectValue, removeNullMembers, replaceStringValue } from '../../src/core/json-bytes.js';
import { stringEnd } from '../../src/core/json-codes.js';

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

/** Pieces of text that put the scanners' structural characters and keys inside strings and keys. */
const piece = fc.oneof(
  fc.constantFrom('model', 'usage', '"', '\\', '\\"', ':', ',', '{', '}', '[', ']', ' ', 'null', '"model":', ',"usage":null', 'é', '✓', '😀', '\n'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);
const text = fc.string({ unit: piece, maxLength: 5 });
/** Keys: often exactly the ones the gateway reads, else text that may contain them. */
const key = fc.oneof(fc.constantFrom('model', 'usage'), text);

/** A JSON value whose objects keep their members as written: in order, a name possibly twice (which JSON.stringify cannot write). */
type Json = null | boolean | number | string | Json[] | JsonObject;
interface JsonObject {
  members: [string, Json][];
}
const isObject = (value: Json | undefined): value is JsonObject => value !== null && typeof value === 'object' && !Array.isArray(value);

const { value: jsonValue, object: jsonObject } = fc.letrec<{ value: Json; array: Json[]; object: JsonObject }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', maxDepth: 4, withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer(),
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    { weight: 3, arbitrary: text },
    { weight: 2, arbitrary: tie('array') },
    { weight: 4, arbitrary: tie('object') },
  ),
  array: fc.array(tie('value'), { maxLength: 4 }),
  object: fc.array(fc.tuple(key, tie('value')), { maxLength: 5 }).map((members) => ({ members })),
}));
/** Shaped as a reply: a string model and an object (or null) usage among other members, at any depth. */
const reply = fc
  .tuple(jsonObject, text, jsonObject, fc.oneof(jsonObject, fc.constant(null)), jsonObject)
  .map(([before, model, between, usage, after]): Json => ({ members: [...before.members, ['model', model], ...between.members, ['usage', usage], ...after.members] }));

/** The JSON text of a value, with `gap` (JSON whitespace) around every structural character. */
function serialize(value: Json, gap: string): string {
  if (Array.isArray(value)) return `[${gap}${value.map((item) => serialize(item, gap)).join(`${gap},${gap}`)}${gap}]`;
  if (isObject(value)) {
    const members = value.members.map(([name, inner]) => `${JSON.stringify(name)}${gap}:${gap}${serialize(inner, gap)}`);
    return `{${gap}${members.join(`${gap},${gap}`)}${gap}}`;
  }
  return JSON.stringify(value);
}
const parsed = (value: Json, gap = ''): unknown => JSON.parse(serialize(value, gap));

/** A JSON document (an object most of the time) and its UTF-8 bytes. */
const document = fc
  .tuple(fc.oneof({ weight: 3, arbitrary: jsonObject as fc.Arbitrary<Json> }, { weight: 2, arbitrary: reply }, jsonValue), fc.constantFrom('', ' ', '\n  ', '\r\n\t'))
  .map(([value, gap]) => ({ value, gap, bytes: Buffer.from(serialize(value, gap)) }));

/** The values of the members named `name`, in the order their names stand in the JSON text. */
function membersNamed(value: Json, name: string, found: Json[] = []): Json[] {
  if (Array.isArray(value)) for (const item of value) membersNamed(item, name, found);
  else if (isObject(value)) {
    for (const [member, inner] of value.members) {
      if (member === name) found.push(inner);
      membersNamed(inner, name, found);
    }
  }
  return found;
}

/** Calls `edit` on the first member named `name` (in text order); false when there is none. */
function editFirst(value: Json, name: string, edit: (member: [string, Json]) => void): boolean {
  if (Array.isArray(value)) return value.some((item) => editFirst(item, name, edit));
  if (!isObject(value)) return false;
  for (const member of value.members) {
    if (member[0] === name) {
      edit(member);
      return true;
    }
    if (editFirst(member[1], name, edit)) return true;
  }
  return false;
}

function withoutNullMembers(value: Json, name: string): Json {
  if (Array.isArray(value)) return value.map((item) => withoutNullMembers(item, name));
  if (!isObject(value)) return value;
  return { members: value.members.filter(([member, inner]) => member !== name || inner !== null).map(([member, inner]) => [member, withoutNullMembers(inner, name)]) };
}

const RUNS = { numRuns: 150 };

describe('json-bytes properties: the scanners agree with JSON.parse', () => {
  it('findKey visits the members of a name in text order, each value where it stands (compositeEnd, stringEnd)', () => {
    fc.assert(
      fc.property(document, fc.constantFrom('model', 'usage'), ({ value, bytes }, name) => {
        const source = latin1(bytes);
        const token = ByteToken.quoted(name);
        const values: unknown[] = [];
        for (let found = findKey(source, token); found; found = findKey(source, token, found.valueStart)) {
          const start = found.valueStart;
          const code = source.charCodeAt(start);
          const end =
            code === 0x7b || code === 0x5b ? compositeEnd(source, start) : code === 0x22 ? stringEnd(source, start) + 1 : start + /^[^,}\]\s]+/.exec(source.slice(start))![0].length;
          values.push(JSON.parse(bytes.toString('utf8', start, end)));
        }
        expect(values).toEqual(membersNamed(value, name).map((member) => parsed(member)));
      }),
      RUNS,
    );
  });

  it('lastObjectValue reads the last usage member when it is an object, firstStringValue the first model when a string', () => {
    fc.assert(
      fc.property(document, ({ value, bytes }) => {
        const usage = membersNamed(value, 'usage').at(-1);
        expect(lastObjectValue(bytes, USAGE)).toEqual(isObject(usage) ? parsed(usage) : null);
        const model = membersNamed(value, 'model')[0];
        expect(firstStringValue(bytes, MODEL)).toBe(typeof model === 'string' ? model : null);
      }),
      RUNS,
    );
  });

  it('replaceStringValue writes the new model over the first one when it is a string, and changes nothing else', () => {
    fc.assert(
      fc.property(document, fc.oneof(text, fc.constantFrom('public-1', 'modèle')), ({ value, gap, bytes }, name) => {
        const out = replaceStringValue(bytes, MODEL, ByteToken.quoted(name));
        const expected = structuredClone(value);
        let replaced = false;
        editFirst(expected, 'model', (member) => {
          if (typeof member[1] !== 'string' || member[1] === name) return;
          member[1] = name;
          replaced = true;
        });
        expect(out.toString('utf8')).toBe(serialize(expected, gap));
        if (!replaced) expect(out).toBe(bytes);
      }),
      RUNS,
    );
  });

  it('removeNullMembers gives JSON that parses as the value without its usage: null members, or the bytes themselves', () => {
    fc.assert(
      fc.property(document, ({ value, bytes }) => {
        const out = removeNullMembers(bytes, USAGE);
        expect(JSON.parse(out.toString('utf8'))).toEqual(parsed(withoutNullMembers(value, 'usage')));
        if (!membersNamed(value, 'usage').includes(null)) expect(out).toBe(bytes);
      }),
      RUNS,
    );
  });

  it('a quoted token stands where indexOf and lastIndexOf find its text, from any start', () => {
    const near = fc.string({ unit: fc.constantFrom('"', 'm', 'o', 'd', 'e', 'l', '"model"', 'x'), maxLength: 12 });
    fc.assert(
      fc.property(near, fc.nat(), (source, start) => {
        const from = start % (source.length + 1);
        for (const token of [MODEL, ByteToken.of('model'), ByteToken.of('"')]) {
          expect(token.indexIn(source, from)).toBe(source.indexOf(token.text, from));
          expect(token.lastIndexIn(source, from)).toBe(source.lastIndexOf(token.text, from));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('stringEnd and compositeEnd find the end of any string, object or array, whatever follows', () => {
    fc.assert(
      fc.property(document, text, ({ bytes }, rest) => {
        const source = latin1(Buffer.concat([bytes, Buffer.from(JSON.stringify(rest))]));
        const first = source.charCodeAt(0);
        if (first === 0x22) expect(stringEnd(source, 0)).toBe(bytes.length - 1);
        if (first === 0x7b || first === 0x5b) expect(compositeEnd(source, 0)).toBe(bytes.length);
        const literal = latin1(Buffer.from(`${JSON.stringify(rest)}}`));
        expect(stringEnd(literal, 0)).toBe(literal.length - 2);
      }),
      RUNS,
    );
  });
});
