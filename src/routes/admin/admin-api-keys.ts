import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { invalidParameter, resourceNotFound } from '../../http/errors.js';
import { Cursor, errorResponses, IsoTime, Nullable, PageLimit } from '../../http/schemas.js';
import { NO_KEY_LIMITS, type KeyLimits } from '../../store/quota-types.js';
import { ApiKeyFields, ApiKeyItem, apiKeyView, BOOTSTRAP_POLICY, KeyBudgetUsage, KeyPolicyFields, mintApiKey } from '../management/api-key-view.js';
import { KeyIdParams, listKeys, readKey, revokeKey, rotateKey, RotateBody, updateKey, UpdateBody } from '../management/api-key-operations.js';
import { checkCostBudget } from '../management/policy-rules.js';
import { auditEvent } from '../audit-event.js';
import { ProjectParams } from './admin-policy.js';

const KeyParams = Type.Object({ ...ProjectParams.properties, ...KeyIdParams.properties });

/** The operator's twin of /v1/api-keys (src/routes/management/api-keys.ts): the same bodies and answers, for any project, with no escalation bound. */
export const adminApiKeyRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store, now } = ctx;

  const existingProject = async (projectId: string) => {
    if (!(await store.projects.get(projectId))) throw resourceNotFound('project', 'project_id');
    return projectId;
  };

  app.get(
    '/admin/v1/projects/:project_id/api-keys',
    {
      schema: {
        summary: 'List the API keys of a project (never secrets), newest first',
        params: ProjectParams,
        querystring: Type.Object({ limit: Type.Optional(PageLimit), cursor: Type.Optional(Cursor) }, { additionalProperties: false }),
        response: {
          200: envelopeSchema({ data: Type.Array(ApiKeyItem), has_more: Type.Boolean(), next_cursor: Nullable(Type.String()) }),
          ...errorResponses,
        },
      },
    },
    async (request) => listKeys(ctx, await existingProject(request.params.project_id), request.query.limit ?? 20, request.query.cursor),
  );

  app.post(
    '/admin/v1/projects/:project_id/api-keys',
    {
      schema: {
        summary: 'Create a key for a project, with any scopes, models, limits, budgets and priority (also recovery when a project has lost its keys)',
        params: ProjectParams,
        body: Type.Object(
          { name: Type.String({ minLength: 1, maxLength: 128 }), expires_at: Type.Optional(IsoTime), ...KeyPolicyFields },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema({ ...ApiKeyFields, secret: Type.String() }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      if (!(await store.projects.get(projectId))) throw resourceNotFound('project', 'project_id');
      const time = now();
      const { name, expires_at: expiresAt, models, scopes, metadata, rate_limits: rates, budgets, priority } = request.body;
      if (expiresAt !== undefined && !(Date.parse(expiresAt) > time)) throw invalidParameter('expires_at must be a time in the future.', 'expires_at');
      // The bounds were checked by the schema /v1/api-keys shares (KeyPolicyFields); like the admin's
      // project policy (admin-policy.ts), no ceiling applies, but a cost budget still needs prices.
      const limits: KeyLimits = { ...NO_KEY_LIMITS, ...rates, ...budgets };
      checkCostBudget(budgets ?? {}, ctx.config);
      // The admin may give any scope and model; unspecified, the key has them all, as a project's first key.
      const policy = {
        models: models === undefined || models === null ? null : [...new Set(models)],
        scopes: scopes === undefined ? BOOTSTRAP_POLICY.scopes : [...new Set(scopes)],
        metadata: metadata ?? {},
        limits,
        // Any priority; unspecified, the key follows its project's.
        priority: priority ?? null,
      };
      const expiry = expiresAt === undefined ? null : new Date(Date.parse(expiresAt)).toISOString();
      const { secret, key } = mintApiKey(projectId, name, expiry, time, policy);
      await store.apiKeys.create(key, auditEvent(request, 'api_key.create', projectId, key.record.id, time));
      return envelope(key.record.id, { ...apiKeyView(key.record), secret });
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/api-keys/:api_key_id',
    {
      schema: {
        summary: 'Read an API key of a project (never its secret), with its budget use',
        params: KeyParams,
        response: { 200: envelopeSchema({ ...ApiKeyFields, usage: KeyBudgetUsage }), ...errorResponses },
      },
    },
    async (request) => readKey(ctx, request.params.project_id, request.params.api_key_id),
  );

  app.patch(
    '/admin/v1/projects/:project_id/api-keys/:api_key_id',
    {
      schema: {
        summary: 'Change an API key: any name, expires_at, models, scopes, metadata, limits, priority',
        params: KeyParams,
        body: UpdateBody,
        response: { 200: envelopeSchema(ApiKeyFields), ...errorResponses },
      },
    },
    async (request) => updateKey(ctx, request, request.params.project_id, request.params.api_key_id, request.body, null),
  );

  app.put(
    '/admin/v1/projects/:project_id/api-keys/:api_key_id',
    {
      schema: {
        summary: 'Rotate an API key: new secret, same id; the old one works for grace_period_seconds',
        params: KeyParams,
        body: RotateBody,
        response: {
          200: envelopeSchema({ ...ApiKeyFields, secret: Type.String(), previous_secret_expires_at: Nullable(IsoTime) }),
          ...errorResponses,
        },
      },
    },
    async (request) => rotateKey(ctx, request, request.params.project_id, request.params.api_key_id, request.body),
  );

  app.delete(
    '/admin/v1/projects/:project_id/api-keys/:api_key_id',
    {
      schema: {
        summary: 'Revoke an API key; it stops working on every replica within a second',
        params: KeyParams,
        response: { 200: envelopeSchema({ ...ApiKeyFields, revoked_at: IsoTime }), ...errorResponses },
      },
    },
    async (request) => revokeKey(ctx, request, request.params.project_id, request.params.api_key_id),
  );
};
