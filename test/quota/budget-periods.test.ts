import { describe, expect, it } from 'vitest';
import { budgetPeriodsAt } from '../../src/quota/budget-periods.js';

describe('budgetPeriodsAt', () => {
  it('answers each UTC day and month right whatever order the times come in (the last day is cached)', () => {
    const times = ['2026-11-30T23:59:59.999Z', '2026-12-01T00:00:00.000Z', '2026-11-30T12:00:00.000Z', '2027-01-01T00:00:00.000Z', '2026-12-31T23:59:59.999Z'];
    for (const time of [...times, ...times.reverse()]) {
      const ms = Date.parse(time);
      const periods = budgetPeriodsAt(ms);
      expect(periods.day).toBe(time.slice(0, 10));
      expect(periods.month).toBe(time.slice(0, 7));
      expect(periods.dayEndMs).toBe(Date.parse(`${time.slice(0, 10)}T00:00:00.000Z`) + 86_400_000);
      expect(periods.monthEndMs).toBeGreaterThan(ms);
      expect(new Date(periods.monthEndMs).getUTCDate()).toBe(1);
      expect(periods.monthEndMs - ms).toBeLessThanOrEqual(31 * 86_400_000);
    }
  });
});
