import { describe, expect, it } from 'vitest';
import { ATTO_PER_MICRO, costParts } from '../../src/store/usage-types.js';

/** The parts by BigInt arithmetic, as costParts computes them above 2^53 attodollars. */
function reference(dollars: number): { costMicros: number; costAtto: number } {
  if (!(dollars > 0)) return { costMicros: 0, costAtto: 0 };
  const atto = BigInt(Math.round(dollars * 1e18));
  const micros = atto / BigInt(ATTO_PER_MICRO);
  return { costMicros: Number(micros), costAtto: Number(atto - micros * BigInt(ATTO_PER_MICRO)) };
}

describe('costParts', () => {
  it('splits a cost into whole micro-dollars and attodollars exactly, on both sides of 2^53 attodollars', () => {
    const values: number[] = [0, -1, Number.NaN, 1e-18, 1.2e-5, 0.0000024, 0.0000096, 1e-6, 2e-6, 3e-6, 0.009, 0.0090071992547409, 0.0090071992547410, 0.01, 1, 123.456789, 1e6];
    // Whole micro-dollars and their neighbours, where the quotient's rounding matters most.
    for (let micros = 1; micros < 20_000; micros += 7) {
      const dollars = micros / 1e6;
      values.push(dollars, dollars * (1 + Number.EPSILON), dollars * (1 - Number.EPSILON), dollars + 1e-18, dollars - 1e-18);
    }
    let seed = 42;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 20_000; i++) values.push(random() * 10 ** (-9 + Math.floor(random() * 12)));
    for (const dollars of values) {
      const parts = costParts(dollars);
      expect(parts, String(dollars)).toEqual(reference(dollars));
      expect(parts.costAtto).toBeGreaterThanOrEqual(0);
      expect(parts.costAtto).toBeLessThan(ATTO_PER_MICRO);
    }
  });
});
