import { Type } from 'typebox';
import { envelopeSchema } from '../http/envelope.js';
import { Nullable } from '../http/schemas.js';
import type { ChatMessage } from './upstream-body.js';

/**
 * What the gateway reads of a chat request, and nothing more: every role, content shape, tool call
 * and unknown field reaches the upstream as written, and the upstream judges it.
 */
export const ChatBodySchema = Type.Object(
  {
    model: Type.String({ minLength: 1, maxLength: 256 }),
    messages: Type.Array(Type.Object({ role: Type.String() }, { additionalProperties: true })),
    stream: Type.Optional(Nullable(Type.Boolean())),
    stream_options: Type.Optional(
      Nullable(Type.Object({ include_usage: Type.Optional(Nullable(Type.Boolean())) }, { additionalProperties: true })),
    ),
    conversation_id: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 128 }))),
    store: Type.Optional(Nullable(Type.Boolean())),
  },
  { additionalProperties: true },
);

/** A chat completion request as validated; unknown fields ride along. */
export interface ChatBody {
  model: string;
  messages: ChatMessage[];
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean | null; [field: string]: unknown } | null;
  conversation_id?: string | null;
  store?: boolean | null;
  [field: string]: unknown;
}

const Usage = Type.Object(
  { prompt_tokens: Type.Integer(), completion_tokens: Type.Integer(), total_tokens: Type.Integer() },
  { additionalProperties: true },
);

export const ChatCompletion = envelopeSchema(
  {
    created: Type.Integer(),
    model: Type.String(),
    choices: Type.Array(Type.Object({}, { additionalProperties: true })),
    usage: Usage,
    conversation_id: Nullable(Type.String()),
  },
  'A chat completion (stream: false): the upstream answer with every field it sent, in the envelope. With stream: true ' +
    'the answer is text/event-stream in the OpenAI chunk format, ending with data: [DONE]; the conversation id is in the ' +
    'x-conversation-id header.',
  { open: true },
);
