import { describe, expect, it } from 'vitest';
import { envelope } from '../../src/http/envelope.js';

describe('envelope', () => {
  it('puts the three envelope fields first, over any of the same name, and keeps every other member in order', () => {
    const upstream = JSON.parse('{"object":"chat.completion","id":"x","b":1,"__proto__":{"polluted":true},"status":"done","a":[2]}') as object;
    const answer = envelope('chatcmpl-1', upstream);
    expect(JSON.stringify(answer)).toBe('{"id":"chatcmpl-1","object":"nova.resource","status":"succeeded","b":1,"__proto__":{"polluted":true},"a":[2]}');
    // The "__proto__" member is data, not the prototype.
    expect(Object.getPrototypeOf(answer)).toBe(Object.prototype);
    expect((answer as { polluted?: boolean }).polluted).toBeUndefined();
  });
});
