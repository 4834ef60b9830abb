import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { projectMismatch, resourceNotFound } from '../../http/errors.js';
import { Cursor, errorResponses, IsoTime, Nullable, PageLimit, ProjectIdParam } from '../../http/schemas.js';
import { ApiKeyFields, ApiKeyItem, apiKeyView, KeyBudgetUsage, KeyPolicyFields, mintApiKey } from './api-key-view.js';
import { scopesOfMask } from '../../auth/key-access.js';
import { auditEvent } from '../audit-event.js';
import { principalOf } from '../principal-of-request.js';
import {
  checkLimitsWithin,
  checkModelsWithin,
  checkPriorityWithin,
  checkScopesWithin,
  futureTime,
  KeyIdParams,
  limitsOf,
  limitsOfKey,
  listKeys,
  readKey,
  revokeKey,
  rotateKey,
  RotateBody,
  unique,
  updateKey,
  UpdateBody,
} from './api-key-operations.js';

/** The keys of a project (docs/api.md), for a key of it; the operator's twin is src/routes/admin/admin-api-keys.ts. */
export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store, now } = ctx;

  app.get(
    '/v1/api-keys',
    {
      config: { scope: 'keys:read' },
      schema: {
        summary: 'List API key metadata of the authenticated project (never secrets)',
        querystring: Type.Object(
          { project_id: ProjectIdParam, limit: Type.Optional(PageLimit), cursor: Type.Optional(Cursor) },
          { additionalProperties: false },
        ),
        response: {
          200: envelopeSchema({ data: Type.Array(ApiKeyItem), has_more: Type.Boolean(), next_cursor: Nullable(Type.String()) }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const { project_id: projectId, limit = 20, cursor } = request.query;
      if (projectId !== principalOf(request).projectId) throw projectMismatch();
      return listKeys(ctx, projectId, limit, cursor);
    },
  );

  app.post(
    '/v1/api-keys',
    {
      config: { scope: 'keys:write' },
      schema: {
        summary: "Create a project-scoped API key; the secret is returned once. Scopes and models default to the creator's",
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 128 }),
            project_id: ProjectIdParam,
            expires_at: Type.Optional(IsoTime),
            ...KeyPolicyFields,
          },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema({ ...ApiKeyFields, secret: Type.String() }), ...errorResponses },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { name, project_id: projectId, expires_at: expiresAt, models, scopes, metadata = {}, priority } = request.body;
      if (projectId !== principal.projectId) throw projectMismatch();
      const given = limitsOf(request.body);
      const creatorLimits = await limitsOfKey(ctx, principal.projectId, principal.keyId);
      const project = await store.projects.get(projectId);
      if (!project) throw resourceNotFound('Project', 'project_id');
      checkLimitsWithin(given, creatorLimits, project, ctx);
      const time = now();
      const expiry = expiresAt === undefined ? null : futureTime(expiresAt, time);
      const creator = principal.access;
      if (scopes !== undefined) checkScopesWithin(creator, scopes);
      if (models !== undefined) checkModelsWithin(creator, models);
      if (priority !== undefined) checkPriorityWithin(creator, priority);
      const policy = {
        scopes: scopes === undefined ? scopesOfMask(creator.scopes) : unique(scopes),
        models: models === undefined ? (creator.models && [...creator.models.patterns]) : models && unique(models),
        metadata,
        // Limits not given are the creator's, as scopes and models are.
        limits: { ...creatorLimits, ...given },
        // Not given: the creator's own, so a key never gets a higher one than its creator by default.
        priority: priority === undefined ? (principal.priority ?? null) : priority,
      };
      const { secret, key } = mintApiKey(projectId, name, expiry, time, policy);
      await store.apiKeys.create(key, auditEvent(request, 'api_key.create', projectId, key.record.id, time));
      request.log.info({ key_id: key.record.id, project_id: projectId }, 'api key created');
      return envelope(key.record.id, { ...apiKeyView(key.record), secret });
    },
  );

  app.put(
    '/v1/api-keys/:api_key_id',
    {
      config: { scope: 'keys:write' },
      schema: {
        summary: 'Rotate an API key: new secret, same id, name and project',
        params: KeyIdParams,
        body: RotateBody,
        response: {
          200: envelopeSchema({ ...ApiKeyFields, secret: Type.String(), previous_secret_expires_at: Nullable(IsoTime) }),
          ...errorResponses,
        },
      },
    },
    async (request) => rotateKey(ctx, request, principalOf(request).projectId, request.params.api_key_id, request.body),
  );

  app.get(
    '/v1/api-keys/:api_key_id',
    {
      config: { scope: 'keys:read' },
      schema: {
        summary: 'Read an API key of the authenticated project (never its secret)',
        params: KeyIdParams,
        response: { 200: envelopeSchema({ ...ApiKeyFields, usage: KeyBudgetUsage }), ...errorResponses },
      },
    },
    async (request) => readKey(ctx, principalOf(request).projectId, request.params.api_key_id),
  );

  app.patch(
    '/v1/api-keys/:api_key_id',
    {
      config: { scope: 'keys:write' },
      schema: {
        summary: 'Change an API key: name, expires_at, models, scopes, metadata, limits, priority; on every replica at once',
        params: KeyIdParams,
        body: UpdateBody,
        response: { 200: envelopeSchema(ApiKeyFields), ...errorResponses },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      return updateKey(ctx, request, principal.projectId, request.params.api_key_id, request.body, principal);
    },
  );

  app.delete(
    '/v1/api-keys/:api_key_id',
    {
      config: { scope: 'keys:write' },
      schema: {
        summary: 'Revoke an API key; it stops working on every replica within a second',
        params: KeyIdParams,
        response: { 200: envelopeSchema({ ...ApiKeyFields, revoked_at: IsoTime }), ...errorResponses },
      },
    },
    async (request) => revokeKey(ctx, request, principalOf(request).projectId, request.params.api_key_id),
  );
};
