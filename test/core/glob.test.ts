import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { matchesGlob } from '../../src/core/glob.js';

const asRegExp = (pattern: string) => new RegExp(`^${pattern.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\/]/g, '\\$&')).join('.*')}$`, 's');

describe('matchesGlob', () => {
  it('matches exact names and * runs', () => {
    expect(matchesGlob('claude-*', 'claude-opus-4-8')).toBe(true);
    expect(matchesGlob('claude-*', 'claude-')).toBe(true);
    expect(matchesGlob('claude-*', 'gpt-4o')).toBe(false);
    expect(matchesGlob('*-mini', 'gpt-4o-mini')).toBe(true);
    expect(matchesGlob('a*b*c', 'axxbyyc')).toBe(true);
    expect(matchesGlob('a*b*c', 'axxbyy')).toBe(false);
    expect(matchesGlob('exact', 'exact')).toBe(true);
    expect(matchesGlob('exact', 'exactly')).toBe(false);
    expect(matchesGlob('*', '')).toBe(true);
  });

  it('agrees with the regular expression it replaces', () => {
    const text = fc.string({ unit: fc.constantFrom('a', 'b', '-', '.', '*'), maxLength: 12 });
    fc.assert(fc.property(text, fc.string({ unit: fc.constantFrom('a', 'b', '-', '.'), maxLength: 16 }), (pattern, name) => matchesGlob(pattern, name) === asRegExp(pattern).test(name)));
  });

  it('answers a pattern of many stars against a long name that does not match without exploding', () => {
    const pattern = `${'*a'.repeat(60)}*b`;
    const name = 'a'.repeat(256);
    expect(matchesGlob(pattern, name)).toBe(false);
    expect(matchesGlob(pattern, `${name}b`)).toBe(true);
  });
});
