import { describe, expect, it } from 'vitest';
import { exceedsJsonDepth } from '../../src/http/json-depth.js';

describe('exceedsJsonDepth', () => {
  it('counts arrays and objects together', () => {
    expect(exceedsJsonDepth('{"a":[{"b":[]}]}', 4)).toBe(false);
    expect(exceedsJsonDepth('{"a":[{"b":[]}]}', 3)).toBe(true);
    expect(exceedsJsonDepth('[[],[],[]]', 2)).toBe(false);
  });

  it('ignores brackets inside strings, escaped quotes included', () => {
    expect(exceedsJsonDepth('{"a":"[[[[{{{{"}', 1)).toBe(false);
    expect(exceedsJsonDepth('{"a":"\\"[[[["}', 1)).toBe(false);
    // An escaped backslash ends before the quote: the string closes and the brackets count.
    expect(exceedsJsonDepth('{"a":"\\\\","b":[[[]]]}', 3)).toBe(true);
  });

  it('agrees with a character-by-character scan on random text of brackets, quotes and backslash runs', () => {
    const reference = (text: string, max: number): boolean => {
      let depth = 0;
      let inString = false;
      for (let i = 0; i < text.length; i++) {
        const c = text[i];
        if (inString) {
          if (c === '\\') i++;
          else if (c === '"') inString = false;
        } else if (c === '"') inString = true;
        else if (c === '[' || c === '{') {
          if (++depth > max) return true;
        } else if (c === ']' || c === '}') depth--;
      }
      return false;
    };
    const alphabet = ['[', ']', '{', '}', '"', '\\', '\\\\', 'a', 'text '];
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31);
    for (let n = 0; n < 2000; n++) {
      const text = Array.from({ length: next() % 40 }, () => alphabet[next() % alphabet.length]).join('');
      for (const max of [1, 2, 4]) expect(exceedsJsonDepth(text, max), text).toBe(reference(text, max));
    }
  });

  it('answers for text that is not JSON without throwing (JSON.parse judges it next)', () => {
    expect(exceedsJsonDepth(']]]]"', 1)).toBe(false);
    expect(exceedsJsonDepth('[[[[', 3)).toBe(true);
  });
});
