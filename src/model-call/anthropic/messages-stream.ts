import { tokensOf, type ReportedUsage } from '../../core/operations.js';
import { messageIdOf, toolUseIdOf } from './message-ids.js';
import { messagesUsageOf } from './messages-usage.js';
import { isRecord } from './records.js';
import { stopOf, type MessagesStop } from './stop-reason.js';

// The kind of the content block that is open.
const NONE = 0;
const TEXT = 1;
const THINKING = 2;
const TOOL = 3;

const TEXT_BLOCK = '{"type":"text","text":""}';
const THINKING_BLOCK = '{"type":"thinking","thinking":"","signature":""}';
const MESSAGE_STOP = 'event: message_stop\ndata: {"type":"message_stop"}\n\n';

/** A tool call of the upstream: the block it streams into, and the id it came with (to tell calls apart). */
interface ToolCall {
  block: number;
  upstreamId: unknown;
}

const blockStop = (index: number) => `event: content_block_stop\ndata: {"type":"content_block_stop","index":${index}}\n\n`;

const blockDelta = (index: number, delta: string) =>
  `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":${delta}}\n\n`;

/**
 * Rebuilds Anthropic's stream events from an OpenAI chat completion stream, one parsed chunk at a
 * time: message_start on the first chunk, a content block per run of reasoning, text or one tool
 * call (a block is stopped when the next one starts), and message_delta + message_stop once the
 * finish_reason and the usage chunk (which OpenAI sends after it) have both come, or at end().
 * Events are built as strings; only upstream values go through JSON.stringify.
 */
export class MessagesStream {
  /** The usage the upstream reported (tokensOf on the usage chunk), null until it came. */
  usage: ReportedUsage | null = null;
  /** end() or a chunk has produced message_stop, after a finish_reason. */
  completed = false;
  /** Any output (text, thinking, a tool call) was sent: used for time-to-first-token. */
  outputStarted = false;
  private readonly model: string;
  private started = false;
  /** No event follows: message_stop or an error went out, or end() came without a finish_reason. */
  private over = false;
  /** Blocks started so far; the open one, if any, is the last. */
  private blocks = 0;
  private open = NONE;
  private readonly toolCalls = new Map<number, ToolCall>();
  private stop: MessagesStop | null = null;
  private toolCallSeen = false;
  private refused = false;

  constructor(
    publicModel: string,
    private readonly messageId?: string,
  ) {
    this.model = JSON.stringify(publicModel);
  }

  /** One OpenAI chat chunk (the parsed JSON of one SSE `data:` event) → the Anthropic SSE text to send now ('' when none). */
  chunk(data: Record<string, unknown>): string {
    if (this.over) return '';
    let out = this.started ? '' : this.messageStart(data.id);
    const choices = data.choices;
    if (Array.isArray(choices)) {
      for (let index = 0; index < choices.length; index++) {
        const choice: unknown = choices[index];
        // Messages have one answer: any further choice (n > 1) is not relayed.
        if (isRecord(choice) && (choice.index === undefined || choice.index === 0)) out += this.choice(choice);
      }
    }
    if (data.usage !== undefined && data.usage !== null) this.usage = tokensOf(data.usage);
    if (this.stop !== null && this.usage !== null) out += this.close(this.stop);
    return out;
  }

  /**
   * The upstream finished (`[DONE]` or the end of its stream). After a finish_reason: the closing
   * events (the open block's stop, message_delta with the stop reason and usage, message_stop).
   * Without one the answer broke off: '' and `completed` stays false, blocks left open as
   * Anthropic leaves them when it fails mid-stream (a tool_use block's stop would claim its input
   * whole); the caller ends the stream with errorEvent. Idempotent.
   */
  end(): string {
    if (this.over) return '';
    if (this.stop !== null) return this.close(this.stop);
    this.over = true;
    return '';
  }

  /** An `event: error` Anthropic event ending the stream early: {type:'error', error:{type, message}}. */
  errorEvent(type: string, message: string): string {
    this.over = true;
    return `event: error\ndata: {"type":"error","error":{"type":${JSON.stringify(type)},"message":${JSON.stringify(message)}}}\n\n`;
  }

  private messageStart(chatId: unknown): string {
    this.started = true;
    const id = JSON.stringify(this.messageId ?? messageIdOf(chatId));
    return `event: message_start\ndata: {"type":"message_start","message":{"id":${id},"type":"message","role":"assistant","model":${this.model},"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0}}}\n\n`;
  }

  private choice(choice: Record<string, unknown>): string {
    let out = '';
    const delta = choice.delta;
    if (isRecord(delta)) {
      const reasoning = delta.reasoning_content ?? delta.reasoning;
      if (typeof reasoning === 'string' && reasoning !== '') {
        out += this.startBlock(THINKING, THINKING_BLOCK) + blockDelta(this.blocks - 1, `{"type":"thinking_delta","thinking":${JSON.stringify(reasoning)}}`);
        this.outputStarted = true;
      }
      const content = delta.content;
      if (typeof content === 'string' && content !== '') out += this.text(content);
      // OpenAI streams a refusal apart from the content; Anthropic has it as text, stopping with `refusal`.
      const refusal = delta.refusal;
      if (typeof refusal === 'string' && refusal !== '') {
        out += this.text(refusal);
        this.refused = true;
      }
      const calls = delta.tool_calls;
      if (Array.isArray(calls)) for (let position = 0; position < calls.length; position++) out += this.toolCall(calls[position], position);
    }
    const finish = choice.finish_reason;
    if (this.stop === null && typeof finish === 'string' && finish !== '') this.stop = stopOf(choice, this.toolCallSeen, this.refused);
    return out;
  }

  private text(text: string): string {
    this.outputStarted = true;
    return this.startBlock(TEXT, TEXT_BLOCK) + blockDelta(this.blocks - 1, `{"type":"text_delta","text":${JSON.stringify(text)}}`);
  }

  /** Starts a block of `kind` unless one is open (text and thinking continue; each tool call has its own). */
  private startBlock(kind: number, block: string): string {
    if (this.open === kind && kind !== TOOL) return '';
    const out = this.open === NONE ? '' : blockStop(this.blocks - 1);
    this.open = kind;
    return `${out}event: content_block_start\ndata: {"type":"content_block_start","index":${this.blocks++},"content_block":${block}}\n\n`;
  }

  /**
   * One tool call fragment. Calls are told apart by `index` (by position when a server leaves it
   * out), and by `id`: a different id at a known index is a new call, as servers that send each
   * call whole at index 0 mean it. Servers send calls one after another, so a new call stops the
   * block before it; a fragment for a call whose block was stopped (a server interleaving calls)
   * still goes to that call's block index, where the SDKs, which assemble by index, put it.
   */
  private toolCall(call: unknown, position: number): string {
    if (!isRecord(call)) return '';
    const index = typeof call.index === 'number' ? call.index : position;
    const fn = isRecord(call.function) ? call.function : undefined;
    let out = '';
    let known = this.toolCalls.get(index);
    const newId = typeof call.id === 'string' && call.id !== '' && known !== undefined && known.upstreamId !== call.id;
    if (known === undefined || newId) {
      const name = typeof fn?.name === 'string' ? fn.name : '';
      const block = `{"type":"tool_use","id":${JSON.stringify(toolUseIdOf(call.id))},"name":${JSON.stringify(name)},"input":{}}`;
      out = this.startBlock(TOOL, block);
      known = { block: this.blocks - 1, upstreamId: call.id };
      this.toolCalls.set(index, known);
      this.toolCallSeen = true;
      this.outputStarted = true;
    }
    const args = fn?.arguments;
    const json = typeof args === 'string' ? args : isRecord(args) ? JSON.stringify(args) : '';
    if (json !== '') out += blockDelta(known.block, `{"type":"input_json_delta","partial_json":${JSON.stringify(json)}}`);
    return out;
  }

  private close(stop: MessagesStop): string {
    const out = this.open === NONE ? '' : blockStop(this.blocks - 1);
    this.open = NONE;
    this.over = true;
    this.completed = true;
    const sequence = stop.sequence === null ? 'null' : JSON.stringify(stop.sequence);
    const usage = JSON.stringify(messagesUsageOf(this.usage));
    return `${out}event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"${stop.reason}","stop_sequence":${sequence}},"usage":${usage}}\n\n${MESSAGE_STOP}`;
  }
}
