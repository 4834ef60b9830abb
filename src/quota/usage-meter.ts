/**
 * What a request consumed, reported by the route that served it. The meter counts each
 * measure once per request id and never blocks or fails the request that reports it.
 */
export interface UsageRecord {
  projectId: string;
  requestId: string;
  model?: string | null;
  /** Admitted requests; set by admission (1), not by routes. */
  requests?: number;
  promptTokens?: number;
  completionTokens?: number;
  imageGenerations?: number;
  audioSeconds?: number;
  /** Change in what the project stores (conversations, transcripts, metadata), in bytes. */
  storageBytesDelta?: number;
  /**
   * Tells apart several reports of one request: one report per (request, part) counts.
   * Default "usage" (the route's report); "request" is admission's own (set with requests: 1).
   */
  part?: string;
  /** When it happened (epoch ms); default: when recorded. */
  atMs?: number;
}

export interface UsageMeter {
  record(usage: UsageRecord): void;
}

/** Counts nothing: for tests that do not look at usage. */
export const noUsageMeter: UsageMeter = { record() {} };
