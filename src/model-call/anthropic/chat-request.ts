import { invalidParameter } from '../../http/errors.js';
import { appendChatMessages } from './chat-messages.js';
import { isRecord, type Json } from './records.js';

/**
 * The Messages request `body` as a chat completions request for `upstreamModel`: every mapping
 * and every dropped control is listed in docs/messages-api.md ("Translation to
 * OpenAI-compatible backends"). Only the fields read here are validated, as Anthropic does; a
 * failure is invalidParameter naming the field's path.
 */
export function chatRequestOf(body: Record<string, unknown>, upstreamModel: string): Record<string, unknown> {
  const messages: Json[] = [];
  const system = systemOf(body.system);
  if (system !== '') messages.push({ role: 'system', content: system });
  if (!Array.isArray(body.messages)) throw invalidParameter('messages: Input should be a valid list', 'messages');
  appendChatMessages(body.messages, messages);

  const chat: Json = { model: upstreamModel, messages };
  if (body.max_tokens !== undefined) chat.max_tokens = body.max_tokens;
  // Passed as sent: the upstream judges their values. vLLM, SGLang, llama.cpp and Ollama take top_k.
  if (body.temperature !== undefined) chat.temperature = body.temperature;
  if (body.top_p !== undefined) chat.top_p = body.top_p;
  if (body.top_k !== undefined) chat.top_k = body.top_k;
  const stop = stopOf(body.stop_sequences);
  if (stop !== undefined) chat.stop = stop;
  if (body.stream === true) {
    chat.stream = true;
    chat.stream_options = { include_usage: true };
  }
  if (isRecord(body.metadata) && typeof body.metadata.user_id === 'string' && body.metadata.user_id !== '') {
    chat.user = body.metadata.user_id;
  }
  addTools(body, chat);
  const effort = effortOf(body);
  if (effort !== undefined) chat.reasoning_effort = effort;
  const format = responseFormatOf(body);
  if (format !== undefined) chat.response_format = format;
  return chat;
}

/** `system` as one string: its text blocks joined (their cache_control dropped); '' when absent. */
function systemOf(system: unknown): string {
  if (system === undefined || system === null) return '';
  if (typeof system === 'string') return system;
  if (!Array.isArray(system)) throw invalidParameter('system: Input should be a valid string or list', 'system');
  let text = '';
  for (let index = 0; index < system.length; index++) {
    const block = system[index];
    const path = `system[${index}]`;
    if (!isRecord(block) || block.type !== 'text') throw invalidParameter(`${path}.type: system blocks must be of type "text"`, `${path}.type`);
    if (typeof block.text !== 'string') throw invalidParameter(`${path}.text: Input should be a valid string`, `${path}.text`);
    text = index === 0 ? block.text : `${text}\n${block.text}`;
  }
  return text;
}

function stopOf(sequences: unknown): string[] | undefined {
  if (sequences === undefined || sequences === null) return undefined;
  if (!Array.isArray(sequences) || !sequences.every((sequence) => typeof sequence === 'string')) {
    throw invalidParameter('stop_sequences: Input should be a list of strings', 'stop_sequences');
  }
  return sequences.length > 0 ? (sequences as string[]) : undefined;
}

/**
 * Custom tools as functions. Tools with a `type` other than "custom" (web_search_20250305,
 * bash_20250124, mcp_toolset …) are run by Anthropic's servers or defined by Anthropic, and have
 * no OpenAI form: they are dropped, and with no tool left `tool_choice` goes too.
 */
function addTools(body: Json, chat: Json): void {
  const tools = body.tools;
  if (tools === undefined || tools === null) return;
  if (!Array.isArray(tools)) throw invalidParameter('tools: Input should be a valid list', 'tools');
  const functions: Json[] = [];
  for (let index = 0; index < tools.length; index++) {
    const tool = tools[index];
    const path = `tools[${index}]`;
    if (!isRecord(tool)) throw invalidParameter(`${path}: Input should be an object`, path);
    if (tool.type !== undefined && tool.type !== null && tool.type !== 'custom') continue;
    if (typeof tool.name !== 'string') throw invalidParameter(`${path}.name: Input should be a valid string`, `${path}.name`);
    if (!isRecord(tool.input_schema)) throw invalidParameter(`${path}.input_schema: Input should be an object`, `${path}.input_schema`);
    const fn: Json = { name: tool.name };
    if (typeof tool.description === 'string') fn.description = tool.description;
    fn.parameters = tool.input_schema;
    if (tool.strict === true) fn.strict = true;
    functions.push({ type: 'function', function: fn });
  }
  if (functions.length === 0) return;
  chat.tools = functions;
  addToolChoice(body.tool_choice, chat);
}

function addToolChoice(choice: unknown, chat: Json): void {
  if (choice === undefined || choice === null) return;
  if (!isRecord(choice)) throw invalidParameter('tool_choice: Input should be an object', 'tool_choice');
  switch (choice.type) {
    case 'auto':
      chat.tool_choice = 'auto';
      break;
    case 'any':
      chat.tool_choice = 'required';
      break;
    case 'none':
      chat.tool_choice = 'none';
      return;
    case 'tool':
      if (typeof choice.name !== 'string') throw invalidParameter('tool_choice.name: Input should be a valid string', 'tool_choice.name');
      chat.tool_choice = { type: 'function', function: { name: choice.name } };
      break;
    default:
      throw invalidParameter("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'", 'tool_choice.type');
  }
  if (choice.disable_parallel_tool_use === true) chat.parallel_tool_calls = false;
}

const EFFORTS: Record<string, string> = { low: 'low', medium: 'medium', high: 'high', xhigh: 'high', max: 'high' };

/**
 * `reasoning_effort` (low, medium or high, what vLLM and OpenAI take): `output_config.effort` when
 * given (xhigh and max as high), else from `thinking`: a budget under 4096 tokens is low, under
 * 16384 medium, more high; adaptive is high, Anthropic's default effort; disabled sends none.
 */
function effortOf(body: Json): string | undefined {
  const config = body.output_config;
  if (isRecord(config) && config.effort !== undefined && config.effort !== null) {
    const effort = typeof config.effort === 'string' && Object.hasOwn(EFFORTS, config.effort) ? EFFORTS[config.effort] : undefined;
    if (effort === undefined) {
      throw invalidParameter("output_config.effort: Input should be 'low', 'medium', 'high', 'xhigh' or 'max'", 'output_config.effort');
    }
    return effort;
  }
  const thinking = body.thinking;
  if (thinking === undefined || thinking === null) return undefined;
  if (!isRecord(thinking)) throw invalidParameter('thinking: Input should be an object', 'thinking');
  if (thinking.type === 'adaptive') return 'high';
  if (thinking.type !== 'enabled') return undefined;
  const budget = thinking.budget_tokens;
  if (typeof budget !== 'number' || !Number.isFinite(budget)) {
    throw invalidParameter('thinking.budget_tokens: Input should be a valid integer', 'thinking.budget_tokens');
  }
  return budget < 4096 ? 'low' : budget < 16384 ? 'medium' : 'high';
}

/** `output_config.format` (or the beta's top-level `output_format`), a JSON schema, as a strict `json_schema` response format. */
function responseFormatOf(body: Json): Json | undefined {
  const config = body.output_config;
  const inConfig = isRecord(config) && config.format !== undefined && config.format !== null;
  const format = inConfig ? config.format : body.output_format;
  if (format === undefined || format === null) return undefined;
  const path = inConfig ? 'output_config.format' : 'output_format';
  if (!isRecord(format) || format.type !== 'json_schema') throw invalidParameter(`${path}.type: Input should be 'json_schema'`, `${path}.type`);
  if (!isRecord(format.schema)) throw invalidParameter(`${path}.schema: Input should be an object`, `${path}.schema`);
  return { type: 'json_schema', json_schema: { name: 'output', schema: format.schema, strict: true } };
}
