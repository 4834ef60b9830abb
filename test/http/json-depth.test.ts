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

  it('answers for text that is not JSON without throwing (JSON.parse judges it next)', () => {
    expect(exceedsJsonDepth(']]]]"', 1)).toBe(false);
    expect(exceedsJsonDepth('[[[[', 3)).toBe(true);
  });
});
