import type { UsageMeter, UsageRecord } from '../../src/quota/usage-meter.js';

/** A UsageMeter that keeps what routes report, for asserting on it. */
export class RecordingUsageMeter implements UsageMeter {
  readonly records: UsageRecord[] = [];

  record(usage: UsageRecord): void {
    this.records.push({ ...usage });
  }

  /** The route's reports of a request (admission's request count is a record of its own). */
  of(requestId: string): UsageRecord[] {
    return this.records.filter((record) => record.requestId === requestId && record.requests === undefined);
  }

  total(field: keyof UsageRecord, projectId?: string): number {
    return this.records
      .filter((usage) => projectId === undefined || usage.projectId === projectId)
      .reduce((sum, usage) => sum + (Number(usage[field]) || 0), 0);
  }
}
