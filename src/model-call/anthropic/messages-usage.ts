import type { ReportedUsage } from '../../core/operations.js';

/** The usage object of a Messages answer (and of a stream's closing message_delta). */
export interface MessagesUsage {
  input_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  output_tokens: number;
}

/**
 * Anthropic's counts from what the upstream reported (tokensOf): its `input_tokens` leaves out
 * the cache, which OpenAI's `prompt_tokens` includes, so cached reads and writes are taken off.
 * Usage that is missing or invalid shows as zeros; the gateway charges the reservation for it.
 */
export function messagesUsageOf(usage: ReportedUsage | null): MessagesUsage {
  if (usage === null || typeof usage !== 'object') {
    return { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 };
  }
  const read = usage.cached_prompt_tokens ?? 0;
  const write = usage.cache_write_tokens ?? 0;
  return {
    input_tokens: Math.max(0, usage.prompt_tokens - read - write),
    cache_creation_input_tokens: write,
    cache_read_input_tokens: read,
    output_tokens: usage.completion_tokens,
  };
}
