/** The UTC calendar periods of the budgets at a time: ids as the store keeps them, and their ends. */
export interface BudgetPeriods {
  /** `YYYY-MM-DD` */
  day: string;
  /** `YYYY-MM` */
  month: string;
  dayEndMs: number;
  monthEndMs: number;
}

export function budgetPeriodsAt(ms: number): BudgetPeriods {
  const at = new Date(ms);
  const iso = at.toISOString();
  const [year, month, date] = [at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate()];
  return { day: iso.slice(0, 10), month: iso.slice(0, 7), dayEndMs: Date.UTC(year, month, date + 1), monthEndMs: Date.UTC(year, month + 1, 1) };
}
