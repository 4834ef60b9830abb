import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { isAdminToken } from '../../auth/admin-token.js';
import { bearerToken } from '../../auth/authenticator.js';
import { closeIfBodyUnread } from '../../auth/unread-body.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { invalidAdminToken, invalidParameter, resourceNotFound } from '../../http/errors.js';
import { mintId } from '../../core/ids.js';
import { errorResponses, Nullable } from '../../http/schemas.js';
import type { ProjectRecord } from '../../store/types.js';
import { ApiKeyFields, apiKeyView, mintApiKey, PrioritySchema } from '../management/api-key-view.js';
import { adminRecordRoutes } from './admin-records.js';
import { adminProjectRoutes } from './admin-projects.js';
import { adminWebhookRoutes } from './admin-webhooks.js';
import { adminApiKeyRoutes } from './admin-api-keys.js';
import { auditEvent } from '../audit-event.js';
import { consoleSessionOf, requireCsrf } from '../console-auth.js';
import { adminPolicyRoutes, ProjectParams } from './admin-policy.js';
import { ProjectFields, projectView } from '../management/project-view.js';
import { checkCostBudget } from '../management/policy-rules.js';
import { CeilingsBody, PolicyFieldsBody } from '../management/policy-schemas.js';

const NewKeyView = Type.Object({ id: Type.String(), ...ApiKeyFields, secret: Type.String() });

const { daily_tokens, monthly_tokens, monthly_cost } = PolicyFieldsBody;
const BudgetFieldsBody = { daily_tokens, monthly_tokens, monthly_cost };

/** The policy of a create body: its flat fields and its nested `rate_limits` / `budgets` together; one field twice, with two values, is a 400. */
function mergedPolicy<Policy extends object>(flat: Policy, nested: Record<'rate_limits' | 'budgets', Partial<Policy> | undefined>): Policy {
  const policy = { ...flat } as Record<string, unknown>;
  for (const [group, fields] of Object.entries(nested)) {
    for (const [field, value] of Object.entries(fields ?? {})) {
      if (policy[field] !== undefined && policy[field] !== value) {
        throw invalidParameter(`${field} is given twice with different values (at the top level or in another group, and in ${group}).`, `${group}.${field}`);
      }
      policy[field] = value;
    }
  }
  return policy as Policy;
}

/** Bootstrap API behind NOVA_ADMIN_TOKEN; not registered at all when the token is unset. */
export const adminRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext; adminToken: string }> = async (app, { ctx, adminToken }) => {
  const { store, now } = ctx;

  // onRequest: on the headers, before any body byte is read; a refusal closes a connection whose body is unread.
  app.addHook('onRequest', async (request, reply) => {
    const { authorization } = request.headers;
    if (isAdminToken(authorization, adminToken)) return;
    // The operator's console session, in place of the token (src/routes/console-auth.ts).
    const session = authorization === undefined ? consoleSessionOf(ctx, request) : null;
    if (session?.role === 'admin') return requireCsrf(ctx, request, session);
    closeIfBodyUnread(reply);
    // Like API keys: a wrong token counts against the address, a missing one does not.
    if (bearerToken(authorization) !== undefined) await ctx.failedAttempts.count(request.ip);
    throw invalidAdminToken();
  });
  await app.register(adminRecordRoutes, { ctx });
  await app.register(adminProjectRoutes, { ctx });
  await app.register(adminPolicyRoutes, { ctx });
  await app.register(adminWebhookRoutes, { ctx });
  await app.register(adminApiKeyRoutes, { ctx });

  app.post(
    '/admin/v1/projects',
    {
      schema: {
        summary: 'Create a project (policy nested in rate_limits and budgets, or flat; ceilings; priority; all optional: config defaults) and its first API key (named "default")',
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 256 }),
            environment: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
            ...PolicyFieldsBody,
            // The policy nested as the answer shows it; the flat fields above stay accepted.
            rate_limits: Type.Optional(Type.Object(PolicyFieldsBody, { additionalProperties: false })),
            budgets: Type.Optional(Type.Object(BudgetFieldsBody, { additionalProperties: false })),
            ceilings: Type.Optional(CeilingsBody),
            priority: Type.Optional(Nullable(PrioritySchema)),
          },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema({ ...ProjectFields, api_key: NewKeyView }), ...errorResponses },
      },
    },
    async (request) => {
      const { name, environment, ceilings, priority, rate_limits: nestedLimits, budgets, ...flat } = request.body;
      const policy = mergedPolicy(flat, { rate_limits: nestedLimits, budgets });
      checkCostBudget(policy, ctx.config);
      const time = now();
      const at = new Date(time).toISOString();
      const project: ProjectRecord = {
        id: mintId('proj', time),
        name,
        environment: environment ?? null,
        created_at: at,
        updated_at: at,
        rate_limits: { ...ctx.config.defaults.rate_limits, ...policy },
        ceilings: ceilings ?? {},
        priority: priority ?? null,
      };
      const { secret, key } = mintApiKey(project.id, 'default', null, time);
      await store.projects.create(project, key, [
        auditEvent(request, 'project.create', project.id, null, time),
        auditEvent(request, 'api_key.create', project.id, key.record.id, time),
      ]);
      request.log.info({ project_id: project.id, key_id: key.record.id }, 'project created');
      return envelope(project.id, { ...projectView(project, ctx.config), api_key: { ...apiKeyView(key.record), secret } });
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/audit',
    {
      schema: {
        summary: 'Audit trail of a project: key creation, rotation and revocation, newest first',
        params: ProjectParams,
        querystring: Type.Object(
          { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })) },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      // A deleted project's trail stays readable (its deletion is the newest entry) for the usage retention.
      const events = await store.audit.list(projectId, request.query.limit ?? 100);
      if (events.length === 0 && !(await store.projects.get(projectId))) throw resourceNotFound('project', 'project_id');
      return envelope(projectId, { data: events });
    },
  );
};
