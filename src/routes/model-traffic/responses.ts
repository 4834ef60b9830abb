import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { resourceNotFound } from '../../http/errors.js';
import { UPSTREAM_ID_PATTERN } from '../../core/ids.js';
import { ErrorResponse, errorResponses, Nullable } from '../../http/schemas.js';
import type { ResponseOwner } from '../../store/response-types.js';
import { ByteToken, firstStringValue, lastObjectValue } from '../../core/json-bytes.js';
import { OPERATIONS, type Operation } from '../../core/operations.js';
import { mapUpstreamStatus } from '../../model-call/upstream-errors.js';
import { readBody, sendToTarget } from '../../model-call/upstream-call.js';
import { ModelCall } from '../../model-call/model-call.js';
import { relayJson } from '../../model-call/json-relay.js';
import { proxyModelRequest, type ModelRequestBody } from '../../model-call/pass-through.js';
import { modelRequestSchema, OpenAiObject } from './model-request-schema.js';
import { relayStream } from '../../model-call/stream-relay.js';
import { principalOf } from '../principal-of-request.js';
import { upstreamBody } from '../../model-call/upstream-body.js';
import type { Target } from '../../model-call/model-registry.js';
import { BackgroundResponses, type BackgroundCall } from '../../model-call/background-response.js';
import { recordResponseHistory, responseHistoryTokens, responseUsageOf } from '../../model-call/response-history.js';

const VALID_ID = new RegExp(UPSTREAM_ID_PATTERN);
const ID_KEY = ByteToken.quoted('id');
const USAGE_KEY = ByteToken.quoted('usage');
const CREATED = Buffer.from('"response.created"');
const COMPLETED = Buffer.from('"response.completed"');
const ERROR_BODY_LIMIT = 64 * 1024;
/** Reading, deleting or cancelling a stored response: metered as requests, not as model calls. */
const STORED: Operation = { ...OPERATIONS.responses, metricName: 'responses_stored' };

const ResponseParams = Type.Object({ response_id: Type.String({ maxLength: 128 }) });
const answers = { 200: OpenAiObject, ...errorResponses, 502: ErrorResponse, 504: ErrorResponse };

/** A response's input + output tokens from the bytes that carry its usage (a reply, a `response.completed` event). */
function historyTokensIn(bytes: Buffer): number | undefined {
  const usage = responseUsageOf(lastObjectValue(bytes, USAGE_KEY));
  return usage ? usage.prompt_tokens + usage.completion_tokens : undefined;
}

/**
 * The Responses API. Responses are created and kept by the upstream; the gateway remembers which
 * project owns each stored one and which target holds it, so only that project can read, continue
 * (`previous_response_id`), cancel or delete it, and each goes to the target that has it.
 */
export const responseRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const ttlMs = ctx.config.responses.retention_seconds * 1000;
  const { background_poll_ms: pollMs, background_max_ms: maxMs } = ctx.config.responses;
  const followers = new BackgroundResponses(ctx, pollMs, maxMs);
  // A plugin's onClose runs before the app's own, so before the usage meter's last flush (app.ts).
  app.addHook('onClose', () => followers.close());
  const ownerOf = async (projectId: string, responseId: string, param: string): Promise<ResponseOwner> => {
    const owner = VALID_ID.test(responseId) ? await ctx.store.responses.get(projectId, responseId) : null;
    if (!owner) throw resourceNotFound('response', param);
    return owner;
  };

  /**
   * `background: true`: the upstream's reply (`queued`) is relayed at once and the request is
   * charged when the response ends (src/model-call/background-response.ts): this call meters
   * nothing itself, its reply has no usage yet.
   */
  const createInBackground = (
    request: FastifyRequest,
    reply: FastifyReply,
    projectId: string,
    body: ModelRequestBody,
    pinned: { target: Target; index: number } | undefined,
    claim: (id: string | null, targetIndex: number) => Promise<void>,
  ): Promise<never> => {
    const model = ctx.models.serving(body.model, OPERATIONS.responses.endpoint);
    const call = new ModelCall(ctx, request, reply, projectId, model, OPERATIONS.responses, false, { metersTokens: false });
    const followed = (target: Target, targetIndex: number): BackgroundCall => ({
      projectId,
      requestId: request.id,
      model,
      target,
      targetIndex,
      reservation: request.reservation,
      charge: request.charge ?? ctx.charges.of('responses', body),
      log: request.log,
    });
    let taken = false;
    return call.run(async () => {
      try {
        const sent = await call.send(
          (upstreamModel) => upstreamBody(body, upstreamModel, { askStreamUsage: OPERATIONS.responses.asksStreamUsage }),
          pinned && [pinned.target],
        );
        const targetIndex = pinned ? pinned.index : sent.attempt.index;
        const relay = {
          onReply: async (bytes: Buffer) => {
            // The owner first (a reply that already ended records its tokens on it); the charge is taken over even when the store fails.
            try {
              await claim(firstStringValue(bytes, ID_KEY), targetIndex);
            } finally {
              taken = true;
              followers.take(followed(sent.attempt.target, targetIndex), bytes);
            }
          },
        };
        return await relayJson(call, sent, relay);
      } catch (error) {
        // The upstream may have queued it before the client left: charged its reservation.
        if (call.signal.aborted && !taken) followers.abandoned(pinned ? followed(pinned.target, pinned.index) : followed(model.targets[0]!, 0));
        throw error;
      }
    });
  };

  app.post(
    '/v1/responses',
    {
      config: { scope: 'model', modelCall: { traffic: 'model', work: 'responses', historyTokens: responseHistoryTokens } },
      schema: {
        summary: 'Create a model response (stream: true for server-sent events with event: lines)',
        body: modelRequestSchema({
          store: Type.Optional(Nullable(Type.Boolean())),
          previous_response_id: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 128 }))),
        }),
        response: answers,
      },
    },
    async (request, reply) => {
      const { projectId } = principalOf(request);
      const body = request.body as ModelRequestBody & { store?: boolean | null; previous_response_id?: string | null; background?: unknown };
      let pinned: { target: Target; index: number } | undefined;
      if (typeof body.previous_response_id === 'string') {
        // The previous response's state lives at the target that created it: no fallback elsewhere.
        const owner = await ownerOf(projectId, body.previous_response_id, 'previous_response_id');
        const target = ctx.models.get(body.model)?.targets[owner.targetIndex];
        if (owner.model === body.model && target) pinned = { target, index: owner.targetIndex };
      }
      const targets = pinned && { targets: [pinned.target], indexOf: () => pinned.index };
      const claim = (id: string | null, targetIndex: number, historyTokens?: number) => {
        if (body.store === false || id === null || !VALID_ID.test(id)) return Promise.resolve();
        return ctx.store.responses.claim(projectId, id, { model: body.model, targetIndex, historyTokens }, ttlMs);
      };
      if (body.background === true && body.stream !== true) return createInBackground(request, reply, projectId, body, pinned, claim);
      let claimed = false;
      const recordHistory = (event: Buffer, targetIndex: number) => {
        const id = firstStringValue(event, ID_KEY);
        const tokens = historyTokensIn(event);
        if (body.store === false || id === null || tokens === undefined) return;
        recordResponseHistory(ctx.store, projectId, id, { model: body.model, targetIndex }, tokens).catch((error: unknown) =>
          request.log.warn({ err: error }, 'response history not stored: store unavailable'),
        );
      };
      return proxyModelRequest(ctx, request, reply, projectId, {
        targets,
        onReply: (bytes, targetIndex) => claim(firstStringValue(bytes, ID_KEY), targetIndex, historyTokensIn(bytes)),
        onEvent: (event, targetIndex) => {
          if (event.includes(COMPLETED)) return recordHistory(event, targetIndex);
          if (claimed || !event.includes(CREATED)) return;
          claimed = true;
          claim(firstStringValue(event, ID_KEY), targetIndex).catch((error: unknown) =>
            request.log.warn({ err: error }, 'response owner not stored: store unavailable'),
          );
        },
      });
    },
  );

  const stored = (method: 'GET' | 'DELETE' | 'POST', suffix: string, summary: string) =>
    app.route({
      method,
      url: `/v1/responses/:response_id${suffix}`,
      config: { scope: 'model', modelCall: { traffic: 'stored', work: 'responses' } },
      schema: { summary, params: ResponseParams, response: answers },
      handler: async (request, reply) => {
        const { projectId } = principalOf(request);
        const responseId = request.params.response_id;
        const owner = await ownerOf(projectId, responseId, 'response_id');
        const model = ctx.models.get(owner.model);
        const target = model?.targets[owner.targetIndex];
        if (!model || target?.kind !== 'http') throw resourceNotFound('response', 'response_id');
        const query = request.url.indexOf('?');
        const streamed = method === 'GET' && suffix === '' && (request.query as Record<string, unknown> | undefined)?.stream === 'true';
        const call = new ModelCall(ctx, request, reply, projectId, model, STORED, streamed, { metersTokens: false });
        return call.run(async () => {
          const attempt = { target, index: owner.targetIndex, startedAt: performance.now() };
          const response = await sendToTarget(
            target,
            {
              method,
              path: `/responses/${encodeURIComponent(responseId)}${suffix}${query === -1 ? '' : request.url.slice(query)}`,
              accept: streamed ? 'text/event-stream' : 'application/json',
            },
            { requestId: request.id, stream: streamed, signal: call.signal },
          );
          if (response.status < 200 || response.status >= 300) {
            call.observeUpstream(attempt, String(response.status));
            throw mapUpstreamStatus(response.status, response.headers, await readBody(response.body, ERROR_BODY_LIMIT).catch(() => ''));
          }
          if (method === 'DELETE') await ctx.store.responses.release(projectId, responseId);
          const sent = { response, attempt };
          if (streamed) return relayStream(call, sent, { hideUsage: false });
          return relayJson(call, sent);
        });
      },
    });
  stored('GET', '', 'Retrieve a stored response of the project (stream=true replays its events)');
  stored('DELETE', '', 'Delete a stored response of the project');
  stored('GET', '/input_items', 'List the input items of a stored response of the project');
  stored('POST', '/cancel', 'Cancel a background response of the project');
};
