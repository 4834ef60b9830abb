/** Why an answer stopped, in the Messages API's words. */
export interface MessagesStop {
  reason: 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use' | 'refusal';
  sequence: string | null;
}

/**
 * The stop sequence that ended a choice, when the server names it: vLLM's `stop_reason` (a
 * string for a stop string, a number for a stop token) or SGLang's `matched_stop`.
 */
function matchedStopOf(choice: Record<string, unknown>): string | null {
  const named = typeof choice.stop_reason === 'string' ? choice.stop_reason : choice.matched_stop;
  return typeof named === 'string' && named !== '' ? named : null;
}

/**
 * A chat choice's `finish_reason` as a Messages stop reason. `toolCalls`: the answer holds tool
 * calls, which some servers end with `stop` (or none) rather than `tool_calls`; agents wait for
 * `tool_use` to run them. `refused`: the answer carried OpenAI's `refusal`.
 */
export function stopOf(choice: Record<string, unknown>, toolCalls: boolean, refused = false): MessagesStop {
  switch (choice.finish_reason) {
    case 'length':
      return { reason: 'max_tokens', sequence: null };
    case 'tool_calls':
    case 'function_call':
      return { reason: 'tool_use', sequence: null };
    case 'content_filter':
      return { reason: 'refusal', sequence: null };
  }
  const sequence = choice.finish_reason === 'stop' ? matchedStopOf(choice) : null;
  if (sequence !== null) return { reason: 'stop_sequence', sequence };
  return { reason: toolCalls ? 'tool_use' : refused ? 'refusal' : 'end_turn', sequence: null };
}
