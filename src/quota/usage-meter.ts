/**
 * What a request consumed, reported by the route that served it. The meter counts each
 * measure once per request id and never blocks or fails the request that reports it.
 */
export interface UsageRecord {
  projectId: string;
  requestId: string;
  model?: string | null;
  promptTokens?: number;
  completionTokens?: number;
  imageGenerations?: number;
  audioSeconds?: number;
  /** Change in what the project stores (conversations, transcripts, metadata), in bytes. */
  storageBytesDelta?: number;
}

export interface UsageMeter {
  record(usage: UsageRecord): void;
}

/** Placeholder until the Redis-backed meter is wired in: counts nothing. */
export const noUsageMeter: UsageMeter = { record() {} };
