import type { UsageMeter, UsageRecord } from '../../src/quota/usage-meter.js';

/** A UsageMeter that keeps what routes report, for asserting on it. */
export class RecordingUsageMeter implements UsageMeter {
  readonly records: UsageRecord[] = [];

  record(usage: UsageRecord): void {
    this.records.push({ ...usage });
  }

  /** The route's reports of a request (admission's request count, a refusal and an error are records of their own). */
  of(requestId: string): UsageRecord[] {
    return this.records.filter((record) => record.requestId === requestId && record.requests === undefined && record.part !== 'error' && record.part !== 'refusal');
  }

  /** The error reports of a request (each reporter's; the meter counts one per request). */
  errorsOf(requestId: string): UsageRecord[] {
    return this.records.filter((record) => record.requestId === requestId && record.part === 'error');
  }

  total(field: keyof UsageRecord, projectId?: string): number {
    return this.records
      .filter((usage) => projectId === undefined || usage.projectId === projectId)
      .reduce((sum, usage) => sum + (Number(usage[field]) || 0), 0);
  }
}
