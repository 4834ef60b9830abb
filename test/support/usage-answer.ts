/** The usage endpoint's answer as tests read it (README "Usage"). */
export interface UsageMeasures {
  requests: number;
  /** cached_prompt and cache_write are parts of prompt, reasoning of completion. */
  tokens: { prompt: number; completion: number; total: number; cached_prompt: number; cache_write: number; reasoning: number };
  image_generations: number;
  audio_seconds: number;
  cost: number;
  refusals: { requests: number; tokens: number; concurrency: number; budget: number };
  errors: number;
}

export interface UsageGroupRow extends UsageMeasures {
  model?: string | null;
  api_key?: string | null;
}

export interface UsageBucketRow extends UsageMeasures {
  start_time: string;
  end_time: string;
  groups?: UsageGroupRow[];
}

export interface UsageAnswer extends UsageMeasures {
  start_time: string;
  end_time: string;
  storage_bytes: number;
  granularity: 'minute' | 'hour';
  group_by?: 'model' | 'api_key';
  groups?: UsageGroupRow[];
  bucket_width?: string;
  buckets?: UsageBucketRow[];
}
