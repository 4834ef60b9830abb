import type { FastifyRequest } from 'fastify';
import { Type, type Static } from 'typebox';
import type { AppContext } from '../app-context.js';
import { hashSecret, generateSecret, redactSecret } from '../../auth/key-format.js';
import { decodeCursor, encodeCursor } from '../../http/cursor.js';
import { envelope } from '../../http/envelope.js';
import { insufficientScope, invalidParameter, modelNotAllowed, resourceNotFound } from '../../http/errors.js';
import { isGatewayId } from '../../core/ids.js';
import { IsoTime, Nullable } from '../../http/schemas.js';
import { apiKeyView, KeyPolicyFields } from './api-key-view.js';
import { checkCeilings, checkCostBudget } from './policy-rules.js';
import { budgetPeriodsAt } from '../../quota/budget-periods.js';
import { POLICY_FIELDS, type Priority, type RateLimitPolicy } from '../../store/policy.js';
import { NO_KEY_LIMITS, type KeyLimits } from '../../store/quota-types.js';
import type { ApiKeyPatch, ProjectRecord } from '../../store/types.js';
import { hasScope, type KeyAccess } from '../../auth/key-access.js';
import { auditEvent } from '../audit-event.js';

/**
 * What a key's routes do, for a key of the project (/v1/api-keys, src/routes/management/api-keys.ts)
 * and for the operator (/admin/v1/projects/:id/api-keys, src/routes/admin/admin-api-keys.ts): one
 * body and one answer for both, so the console speaks to either alike.
 */

/** Who acts on a key: a key of its project (no escalation past its own access and limits), or the operator (null). */
export type KeyCaller = { access: KeyAccess; keyId: string } | null;

export const MAX_GRACE_SECONDS = 604_800;

export const KeyIdParams = Type.Object({ api_key_id: Type.String({ maxLength: 128 }) });

/**
 * No escalation: a key gives another key (or itself) only scopes it has. The message names the
 * first scope it lacks.
 */
export function checkScopesWithin(caller: KeyAccess, scopes: readonly string[]): void {
  for (const scope of scopes) if (!hasScope(caller, scope as Parameters<typeof hasScope>[1])) throw insufficientScope(scope, 'scopes');
}

/**
 * A key limited to some models gives only those: each pattern one of its own, or an exact id its
 * list allows; never every model (null).
 */
export function checkModelsWithin(caller: KeyAccess, models: readonly string[] | null): void {
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
export function checkPriorityWithin(caller: KeyAccess, priority: Priority | null): void {
  if ((priority === 'high' || priority === null) && !hasScope(caller, 'project:write')) throw insufficientScope('project:write', 'priority');
}

export function futureTime(value: string, now: number): string {
  const ms = Date.parse(value);
  if (!(ms > now)) throw invalidParameter('expires_at must be a time in the future.', 'expires_at');
  return new Date(ms).toISOString();
}

export const unique = <T>(values: readonly T[]): T[] => [...new Set(values)];

export type LimitsBody = { rate_limits?: Partial<Record<string, number | null>>; budgets?: Partial<Record<string, number | null>> };

/** The limits a create or PATCH body gives (nested rate_limits and budgets), as one patch. */
export function limitsOf({ rate_limits: rates, budgets }: LimitsBody): Partial<KeyLimits> {
  return { ...rates, ...budgets } as Partial<KeyLimits>;
}

/**
 * No escalation of limits: a key sets another key's (or its own) limits only within what its creator
 * could set: at most the caller's own limit where it has one (and no removing it), and at most the
 * project's ceiling (the same ceilings as a project key's own policy, DESIGN.md section 7); a cost
 * budget needs a priced model. 400 naming the field.
 */
export function checkLimitsWithin(patch: Partial<KeyLimits>, caller: KeyLimits, project: ProjectRecord, ctx: AppContext): void {
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
  const values = limitValues(patch);
  checkCeilings(values, project.ceilings, ctx.config);
  checkCostBudget(values, ctx.config);
}


/** The limits a patch sets to a value (null removes one). */
const limitValues = (patch: Partial<KeyLimits>) => Object.fromEntries(Object.entries(patch).filter(([, value]) => value !== null)) as Partial<RateLimitPolicy>;

export const RotateBody = Type.Object(
  {
    grace_period_seconds: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_GRACE_SECONDS })),
    reason: Type.Optional(Type.String({ maxLength: 1000 })),
  },
  { additionalProperties: false },
);

export const UpdateBody = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    expires_at: Type.Optional(Nullable(IsoTime)),
    ...KeyPolicyFields,
  },
  { additionalProperties: false },
);

export async function listKeys(ctx: AppContext, projectId: string, limit: number, cursor: string | undefined) {
  const before = cursor === undefined ? null : decodeCursor(cursor, (id) => isGatewayId('key', id));
  const page = await ctx.store.apiKeys.list(projectId, limit, before);
  const last = page.data.at(-1);
  return envelope(projectId, {
    data: page.data.map(apiKeyView),
    has_more: page.hasMore,
    next_cursor: page.hasMore && last ? encodeCursor(last.id) : null,
  });
}

export async function readKey(ctx: AppContext, projectId: string, keyId: string) {
  const record = await ctx.store.apiKeys.get(projectId, keyId);
  if (!record) throw resourceNotFound('API key', 'api_key_id');
  const { id, ...fields } = apiKeyView(record);
  const { day, month } = budgetPeriodsAt(ctx.now());
  const used = await ctx.store.quota.keyBudgetUsage(projectId, keyId, day, month);
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
}

export async function rotateKey(ctx: AppContext, request: FastifyRequest, projectId: string, keyId: string, body: Static<typeof RotateBody>) {
  const { grace_period_seconds: grace = 0, reason } = body;
  const time = ctx.now();
  const secret = generateSecret();
  const previousValidUntil = grace > 0 ? time + grace * 1000 : null;
  const rotated = await ctx.store.apiKeys.rotate(
    projectId,
    keyId,
    { hash: hashSecret(secret), redactedValue: redactSecret(secret) },
    previousValidUntil,
    auditEvent(request, 'api_key.rotate', projectId, keyId, time, reason ?? null),
  );
  if (!rotated) throw resourceNotFound('API key', 'api_key_id');
  await ctx.authenticator.invalidate(rotated.changedHashes);
  request.log.info({ key_id: keyId, project_id: projectId, grace_period_seconds: grace }, 'api key rotated');
  return envelope(keyId, {
    ...apiKeyView(rotated.record),
    secret,
    previous_secret_expires_at: rotated.record.previous_secret_expires_at,
  });
}

export async function updateKey(
  ctx: AppContext,
  request: FastifyRequest,
  projectId: string,
  keyId: string,
  body: Static<typeof UpdateBody>,
  caller: KeyCaller,
) {
  const { store, now } = ctx;
  const { name, expires_at: expiresAt, models, scopes, metadata, priority } = body;
  const patch: ApiKeyPatch = {};
  if (name !== undefined) patch.name = name;
  if (expiresAt !== undefined) patch.expires_at = expiresAt === null ? null : futureTime(expiresAt, now());
  if (scopes !== undefined) {
    if (caller) checkScopesWithin(caller.access, scopes);
    patch.scopes = unique(scopes);
  }
  if (models !== undefined) {
    if (caller) checkModelsWithin(caller.access, models);
    patch.models = models && unique(models);
  }
  if (metadata !== undefined) patch.metadata = metadata;
  if (priority !== undefined) {
    if (caller) checkPriorityWithin(caller.access, priority);
    patch.priority = priority;
  }
  const limits = limitsOf(body);
  if (Object.keys(limits).length > 0) {
    const project = await store.projects.get(projectId);
    if (!project) throw resourceNotFound('Project', 'project_id');
    // The operator sets any limit, as with a project's policy (admin-policy.ts); a cost budget still needs prices.
    if (caller) checkLimitsWithin(limits, await limitsOfKey(ctx, projectId, caller.keyId), project, ctx);
    else checkCostBudget(limitValues(limits), ctx.config);
    patch.limits = limits;
  }
  if (Object.keys(patch).length === 0) {
    throw invalidParameter('Give at least one field to change: name, expires_at, models, scopes, metadata, rate_limits, budgets or priority.', 'body');
  }
  const time = now();
  const updated = await store.apiKeys.update(projectId, keyId, patch, auditEvent(request, 'api_key.update', projectId, keyId, time));
  if (!updated) throw resourceNotFound('API key', 'api_key_id');
  // The cached principals hold the old scopes and models: dropped on every replica, as a revocation's are.
  await ctx.authenticator.invalidate(updated.changedHashes);
  request.log.info({ key_id: keyId, project_id: projectId, fields: Object.keys(patch) }, 'api key updated');
  const { id, ...fields } = apiKeyView(updated.record);
  return envelope(id, fields);
}

export async function revokeKey(ctx: AppContext, request: FastifyRequest, projectId: string, keyId: string) {
  const time = ctx.now();
  const revoked = await ctx.store.apiKeys.revoke(projectId, keyId, auditEvent(request, 'api_key.revoke', projectId, keyId, time));
  if (!revoked) throw resourceNotFound('API key', 'api_key_id');
  await ctx.authenticator.invalidate(revoked.changedHashes);
  request.log.info({ key_id: keyId, project_id: projectId }, 'api key revoked');
  return envelope(keyId, { ...apiKeyView(revoked.record), revoked_at: new Date(time).toISOString() });
}

/** A key's own limits (its record): what it may give at most. */
export const limitsOfKey = async (ctx: AppContext, projectId: string, keyId: string): Promise<KeyLimits> =>
  (await ctx.store.apiKeys.get(projectId, keyId))?.limits ?? NO_KEY_LIMITS;
