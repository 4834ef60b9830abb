import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { hashSecret, generateSecret, redactSecret } from '../../auth/key-format.js';
import { decodeCursor, encodeCursor } from '../../http/cursor.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { invalidParameter, projectMismatch, resourceNotFound } from '../../http/errors.js';
import { isGatewayId } from '../../core/ids.js';
import { Cursor, errorResponses, IsoTime, Nullable, PageLimit, ProjectIdParam } from '../../http/schemas.js';
import { ApiKeyFields, ApiKeyItem, apiKeyView, mintApiKey } from './api-key-view.js';
import { auditEvent } from '../audit-event.js';
import { principalOf } from '../principal-of-request.js';

const MAX_GRACE_SECONDS = 604_800;

const KeyIdParams = Type.Object({ api_key_id: Type.String({ maxLength: 128 }) });

export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store, authenticator, now } = ctx;

  app.get(
    '/v1/api-keys',
    {
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
      const principal = principalOf(request);
      const { project_id: projectId, limit = 20, cursor } = request.query;
      if (projectId !== principal.projectId) throw projectMismatch();
      const before = cursor === undefined ? null : decodeCursor(cursor, (id) => isGatewayId('key', id));
      const page = await store.apiKeys.list(projectId, limit, before);
      const last = page.data.at(-1);
      return envelope(projectId, {
        data: page.data.map(apiKeyView),
        has_more: page.hasMore,
        next_cursor: page.hasMore && last ? encodeCursor(last.id) : null,
      });
    },
  );

  app.post(
    '/v1/api-keys',
    {
      schema: {
        summary: 'Create a project-scoped API key; the secret is returned once',
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 128 }),
            project_id: ProjectIdParam,
            expires_at: Type.Optional(IsoTime),
          },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema({ ...ApiKeyFields, secret: Type.String() }), ...errorResponses },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { name, project_id: projectId, expires_at: expiresAt } = request.body;
      if (projectId !== principal.projectId) throw projectMismatch();
      const time = now();
      let expiry: string | null = null;
      if (expiresAt !== undefined) {
        const expiresMs = Date.parse(expiresAt);
        if (!(expiresMs > time)) throw invalidParameter('expires_at must be a time in the future.', 'expires_at');
        expiry = new Date(expiresMs).toISOString();
      }
      const { secret, key } = mintApiKey(projectId, name, expiry, time);
      await store.apiKeys.create(key, auditEvent(request, 'api_key.create', projectId, key.record.id, time));
      request.log.info({ key_id: key.record.id, project_id: projectId }, 'api key created');
      return envelope(key.record.id, { ...apiKeyView(key.record), secret });
    },
  );

  app.put(
    '/v1/api-keys/:api_key_id',
    {
      schema: {
        summary: 'Rotate an API key: new secret, same id, name and project',
        params: KeyIdParams,
        body: Type.Object(
          {
            grace_period_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_GRACE_SECONDS })),
            reason: Type.Optional(Type.String({ maxLength: 1000 })),
          },
          { additionalProperties: false },
        ),
        response: {
          200: envelopeSchema({ ...ApiKeyFields, secret: Type.String(), previous_secret_expires_at: Nullable(IsoTime) }),
          ...errorResponses,
        },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { api_key_id: keyId } = request.params;
      const { grace_period_seconds: grace = 0, reason } = request.body;
      const time = now();
      const secret = generateSecret();
      const previousValidUntil = grace > 0 ? time + grace * 1000 : null;
      const rotated = await store.apiKeys.rotate(
        principal.projectId,
        keyId,
        { hash: hashSecret(secret), redactedValue: redactSecret(secret) },
        previousValidUntil,
        auditEvent(request, 'api_key.rotate', principal.projectId, keyId, time, reason ?? null),
      );
      if (!rotated) throw resourceNotFound('API key', 'api_key_id');
      await authenticator.invalidate(rotated.changedHashes);
      request.log.info({ key_id: keyId, project_id: principal.projectId, grace_period_seconds: grace }, 'api key rotated');
      return envelope(keyId, {
        ...apiKeyView(rotated.record),
        secret,
        previous_secret_expires_at: rotated.record.previous_secret_expires_at,
      });
    },
  );

  app.delete(
    '/v1/api-keys/:api_key_id',
    {
      schema: {
        summary: 'Revoke an API key; it stops working on every replica within a second',
        params: KeyIdParams,
        response: { 200: envelopeSchema({ ...ApiKeyFields, revoked_at: IsoTime }), ...errorResponses },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { api_key_id: keyId } = request.params;
      const time = now();
      const revoked = await store.apiKeys.revoke(
        principal.projectId,
        keyId,
        auditEvent(request, 'api_key.revoke', principal.projectId, keyId, time),
      );
      if (!revoked) throw resourceNotFound('API key', 'api_key_id');
      await authenticator.invalidate(revoked.changedHashes);
      request.log.info({ key_id: keyId, project_id: principal.projectId }, 'api key revoked');
      return envelope(keyId, { ...apiKeyView(revoked.record), revoked_at: new Date(time).toISOString() });
    },
  );
};
