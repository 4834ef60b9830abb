import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { hashSecret, generateSecret, redactSecret } from '../../auth/key-format.js';
import { decodeCursor, encodeCursor } from '../../http/cursor.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { invalidParameter, projectMismatch, resourceNotFound } from '../../http/errors.js';
import { isGatewayId } from '../../core/ids.js';
import { Cursor, errorResponses, IsoTime, Nullable, PageLimit, ProjectIdParam } from '../../http/schemas.js';
import { ApiKeyFields, ApiKeyItem, apiKeyView, KeyBudgets, KeyBudgetUsage, KeyMetadata, KeyModels, KeyPolicyFields, KeyRateLimits, KeyScopes, mintApiKey, PrioritySchema } from './api-key-view.js';
import { checkCeilings, checkCostBudget } from './policy-rules.js';
import { budgetPeriodsAt } from '../../quota/budget-periods.js';
import { POLICY_FIELDS, type Priority, type RateLimitPolicy } from '../../store/policy.js';
import { NO_KEY_LIMITS, type KeyLimits } from '../../store/quota-types.js';
import type { ProjectRecord } from '../../store/types.js';
import { hasScope, scopesOfMask, type KeyAccess } from '../../auth/key-access.js';
import { insufficientScope, modelNotAllowed } from '../../http/errors.js';
import type { ApiKeyPatch } from '../../store/types.js';
import { auditEvent } from '../audit-event.js';
import { principalOf } from '../principal-of-request.js';

const MAX_GRACE_SECONDS = 604_800;

const KeyIdParams = Type.Object({ api_key_id: Type.String({ maxLength: 128 }) });

/**
 * No escalation: a key gives another key (or itself) only scopes it has. The message names the
 * first scope it lacks.
 */
function checkScopesWithin(caller: KeyAccess, scopes: readonly string[]): void {
  for (const scope of scopes) if (!hasScope(caller, scope as Parameters<typeof hasScope>[1])) throw insufficientScope(scope, 'scopes');
}

/**
 * A key limited to some models gives only those: each pattern one of its own, or an exact id its
 * list allows; never every model (null).
 */
function checkModelsWithin(caller: KeyAccess, models: readonly string[] | null): void {
  if (caller.models === null) return;
  if (models === null) throw modelNotAllowed('*', 'models');
  for (const pattern of models) {
    const own = caller.models.patterns.includes(pattern) || (!pattern.includes('*') && caller.models.matches(pattern));
    if (!own) throw modelNotAllowed(pattern, 'models');
  }
}

/**
 * No escalation of priority: `high`, and null (the key then follows its project, whose priority the
 * admin may have set high), need the caller's `project:write`, the scope of the project's own
 * settings; without it a key gives only `normal` or `low`. 403 naming the scope, param `priority`.
 */
function checkPriorityWithin(caller: KeyAccess, priority: Priority | null): void {
  if ((priority === 'high' || priority === null) && !hasScope(caller, 'project:write')) throw insufficientScope('project:write', 'priority');
}

function futureTime(value: string, now: number): string {
  const ms = Date.parse(value);
  if (!(ms > now)) throw invalidParameter('expires_at must be a time in the future.', 'expires_at');
  return new Date(ms).toISOString();
}

const unique = <T>(values: readonly T[]): T[] => [...new Set(values)];

type LimitsBody = { rate_limits?: Partial<Record<string, number | null>>; budgets?: Partial<Record<string, number | null>> };

/** The limits a create or PATCH body gives (nested rate_limits and budgets), as one patch. */
function limitsOf({ rate_limits: rates, budgets }: LimitsBody): Partial<KeyLimits> {
  return { ...rates, ...budgets } as Partial<KeyLimits>;
}

/**
 * No escalation of limits: a key sets another key's (or its own) limits only within what its creator
 * could set: at most the caller's own limit where it has one (and no removing it), and at most the
 * project's ceiling (the same ceilings as a project key's own policy, DESIGN.md section 7); a cost
 * budget needs a priced model. 400 naming the field.
 */
function checkLimitsWithin(patch: Partial<KeyLimits>, caller: KeyLimits, project: ProjectRecord, ctx: AppContext): void {
  for (const field of POLICY_FIELDS) {
    const value = patch[field];
    const own = caller[field];
    if (value === undefined || own === null) continue;
    if (value === null || value > own) {
      const asked = value === null ? 'null (no limit)' : String(value);
      throw invalidParameter(`${field} ${asked} is above this API key's own ${field} of ${own}; a key cannot give more than it has.`, field);
    }
  }
  // null removes the key's own limit: its project's still bounds it, so only values meet the ceilings.
  const values = Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== null)) as Partial<RateLimitPolicy>;
  checkCeilings(values, project.ceilings, ctx.config);
  checkCostBudget(values, ctx.config);
}

export const apiKeyRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store, authenticator, now } = ctx;

  /** The caller's own limits (its record): what it may give at most. */
  const limitsOfKey = async (projectId: string, keyId: string): Promise<KeyLimits> => (await store.apiKeys.get(projectId, keyId))?.limits ?? NO_KEY_LIMITS;

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
      const creatorLimits = await limitsOfKey(principal.projectId, principal.keyId);
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
    async (request) => {
      const { projectId } = principalOf(request);
      const { api_key_id: keyId } = request.params;
      const record = await store.apiKeys.get(projectId, keyId);
      if (!record) throw resourceNotFound('API key', 'api_key_id');
      const { id, ...fields } = apiKeyView(record);
      const { day, month } = budgetPeriodsAt(now());
      const used = await store.quota.keyBudgetUsage(projectId, keyId, day, month);
      const limits = record.limits ?? NO_KEY_LIMITS;
      const left = (limit: number | null, spent: number) => (limit === null ? null : Math.max(0, limit - spent));
      return envelope(id, {
        ...fields,
        usage: {
          day,
          month,
          used: {
            daily_tokens: limits.daily_tokens === null ? null : used.dayTokens,
            monthly_tokens: limits.monthly_tokens === null ? null : used.monthTokens,
            monthly_cost: limits.monthly_cost === null ? null : used.monthCost,
          },
          remaining: {
            daily_tokens: left(limits.daily_tokens, used.dayTokens),
            monthly_tokens: left(limits.monthly_tokens, used.monthTokens),
            monthly_cost: left(limits.monthly_cost, used.monthCost),
          },
        },
      });
    },
  );

  app.patch(
    '/v1/api-keys/:api_key_id',
    {
      config: { scope: 'keys:write' },
      schema: {
        summary: 'Change an API key: name, expires_at, models, scopes, metadata, limits, priority; on every replica at once',
        params: KeyIdParams,
        body: Type.Object(
          {
            name: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
            expires_at: Type.Optional(Nullable(IsoTime)),
            models: Type.Optional(Nullable(KeyModels)),
            scopes: Type.Optional(KeyScopes),
            metadata: Type.Optional(KeyMetadata),
            rate_limits: Type.Optional(KeyRateLimits),
            budgets: Type.Optional(KeyBudgets),
            priority: Type.Optional(Nullable(PrioritySchema)),
          },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema(ApiKeyFields), ...errorResponses },
      },
    },
    async (request) => {
      const principal = principalOf(request);
      const { api_key_id: keyId } = request.params;
      const { name, expires_at: expiresAt, models, scopes, metadata, priority } = request.body;
      const patch: ApiKeyPatch = {};
      if (name !== undefined) patch.name = name;
      if (expiresAt !== undefined) patch.expires_at = expiresAt === null ? null : futureTime(expiresAt, now());
      if (scopes !== undefined) {
        checkScopesWithin(principal.access, scopes);
        patch.scopes = unique(scopes);
      }
      if (models !== undefined) {
        checkModelsWithin(principal.access, models);
        patch.models = models && unique(models);
      }
      if (metadata !== undefined) patch.metadata = metadata;
      if (priority !== undefined) {
        checkPriorityWithin(principal.access, priority);
        patch.priority = priority;
      }
      const limits = limitsOf(request.body);
      if (Object.keys(limits).length > 0) {
        const project = await store.projects.get(principal.projectId);
        if (!project) throw resourceNotFound('Project', 'project_id');
        checkLimitsWithin(limits, await limitsOfKey(principal.projectId, principal.keyId), project, ctx);
        patch.limits = limits;
      }
      if (Object.keys(patch).length === 0) {
        throw invalidParameter('Give at least one field to change: name, expires_at, models, scopes, metadata, rate_limits, budgets or priority.', 'body');
      }
      const time = now();
      const updated = await store.apiKeys.update(principal.projectId, keyId, patch, auditEvent(request, 'api_key.update', principal.projectId, keyId, time));
      if (!updated) throw resourceNotFound('API key', 'api_key_id');
      // The cached principals hold the old scopes and models: dropped on every replica, as a revocation's are.
      await authenticator.invalidate(updated.changedHashes);
      request.log.info({ key_id: keyId, project_id: principal.projectId, fields: Object.keys(patch) }, 'api key updated');
      const { id, ...fields } = apiKeyView(updated.record);
      return envelope(id, fields);
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
