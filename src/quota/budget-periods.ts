/** The UTC calendar periods of the budgets at a time: ids as the store keeps them, and their ends. */
export interface BudgetPeriods {
  /** `YYYY-MM-DD` */
  day: string;
  /** `YYYY-MM` */
  month: string;
  dayEndMs: number;
  monthEndMs: number;
}

const DAY_MS = 86_400_000;
/** The last answer: every admission asks, and the UTC day rarely changes between two asks. */
let last: BudgetPeriods | null = null;

export function budgetPeriodsAt(ms: number): BudgetPeriods {
  if (last === null || ms < last.dayEndMs - DAY_MS || ms >= last.dayEndMs) last = computePeriods(ms);
  return last;
}

function computePeriods(ms: number): BudgetPeriods {
  const at = new Date(ms);
  const iso = at.toISOString();
  const [year, month, date] = [at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()];
  return { day: iso.slice(0, 10), month: iso.slice(0, 7), dayEndMs: Date.UTC(year, month, date + 1), monthEndMs: Date.UTC(year, month + 1, 1) };
}
