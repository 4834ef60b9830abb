import { randomBytes } from 'node:crypto';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import type { AppContext } from '../app-context.js';
import { alertId } from '../../alerts/alert-events.js';
import { webhookSecretKey } from '../../config/alert-webhooks.js';
import { envelope, envelopeSchema } from '../../http/envelope.js';
import { invalidParameter, resourceNotFound } from '../../http/errors.js';
import { errorResponses, Nullable } from '../../http/schemas.js';
import { DEFAULT_ALERT_THRESHOLDS, type DeliveryRecord, type WebhookRecord } from '../../store/alert-types.js';
import { ProjectParams } from './admin-policy.js';
import { auditEvent } from '../audit-event.js';

const MAX_WEBHOOKS_PER_PROJECT = 16;
const Format = Type.Union([Type.Literal('standard'), Type.Literal('slack')]);
const Thresholds = Type.Array(Type.Number({ exclusiveMinimum: 0, maximum: 10 }), { minItems: 1, maxItems: 16, uniqueItems: true });

const WebhookFields = {
  project_id: Type.String(),
  url: Type.String(),
  format: Format,
  thresholds: Type.Array(Type.Number()),
  created_at: Type.String(),
};
const WebhookView = Type.Object({ id: Type.String(), ...WebhookFields });

const DeliveryView = Type.Object({
  id: Type.String(),
  event_id: Type.String(),
  event_type: Type.String(),
  project_id: Type.String(),
  webhook_id: Type.String(),
  status: Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')]),
  attempts: Type.Integer(),
  last_status_code: Nullable(Type.Integer()),
  last_error: Nullable(Type.String()),
  created_at: Type.String(),
  last_attempt_at: Nullable(Type.String()),
  next_attempt_at: Nullable(Type.String()),
  delivered_at: Nullable(Type.String()),
});

/**
 * A Slack incoming-webhook URL is itself the credential, so after creation only its origin is
 * shown; a standard webhook's URL is shown whole (its secret is apart).
 */
function shownUrl(webhook: WebhookRecord): string {
  return webhook.format === 'slack' ? `${new URL(webhook.url).origin}/…` : webhook.url;
}

const webhookView = (webhook: WebhookRecord) => ({
  id: webhook.id,
  project_id: webhook.project_id,
  url: shownUrl(webhook),
  format: webhook.format,
  thresholds: webhook.thresholds,
  created_at: webhook.created_at,
});

/** Per-project webhooks of budget alerts and key-expiry notices, and the delivery log (docs/alerts.md). */
export const adminWebhookRoutes: FastifyPluginAsyncTypebox<{ ctx: AppContext }> = async (app, { ctx }) => {
  const { store } = ctx;
  const existingProject = async (projectId: string) => {
    if (!(await store.projects.get(projectId))) throw resourceNotFound('project', 'project_id');
  };

  app.post(
    '/admin/v1/projects/:project_id/webhooks',
    {
      schema: {
        summary: 'Add a webhook to a project; a standard webhook answers its signing secret here only',
        params: ProjectParams,
        body: Type.Object(
          {
            url: Type.String({ pattern: '^https?://', maxLength: 2048 }),
            format: Type.Optional(Format),
            thresholds: Type.Optional(Thresholds),
            // `whsec_` + base64 of 24 to 64 bytes; default: one minted here.
            secret: Type.Optional(Type.String({ maxLength: 128 })),
          },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema({ ...WebhookFields, secret: Nullable(Type.String()) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      const { url, format = 'standard', thresholds = [...DEFAULT_ALERT_THRESHOLDS], secret: given } = request.body;
      try {
        new URL(url);
      } catch {
        throw invalidParameter('url is not a valid URL.', 'url');
      }
      if (given !== undefined && format === 'slack') throw invalidParameter('secret applies to format standard only (Slack messages are not signed).', 'secret');
      if (given !== undefined && !webhookSecretKey(given)) throw invalidParameter('secret must be "whsec_" and the base64 of 24 to 64 bytes.', 'secret');
      await existingProject(projectId);
      if ((await store.alerts.listWebhooks(projectId)).length >= MAX_WEBHOOKS_PER_PROJECT) {
        throw invalidParameter(`a project has at most ${MAX_WEBHOOKS_PER_PROJECT} webhooks.`, 'url');
      }
      const time = ctx.now();
      const secret = format === 'slack' ? null : (given ?? `whsec_${randomBytes(32).toString('base64')}`);
      const webhook: WebhookRecord = { id: alertId('wh', time), project_id: projectId, url, format, thresholds, secret, created_at: new Date(time).toISOString() };
      await store.alerts.addWebhook(webhook, auditEvent(request, 'webhook.create', projectId, null, time, webhook.id));
      // Never the URL (a Slack URL is a credential) nor the secret.
      request.log.info({ project_id: projectId, webhook_id: webhook.id, format }, 'webhook added');
      return envelope(webhook.id, { ...webhookView(webhook), secret });
    },
  );

  app.get(
    '/admin/v1/projects/:project_id/webhooks',
    {
      schema: {
        summary: "List a project's webhooks (secrets are not shown)",
        params: ProjectParams,
        response: { 200: envelopeSchema({ data: Type.Array(WebhookView) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId } = request.params;
      await existingProject(projectId);
      const webhooks = await store.alerts.listWebhooks(projectId);
      return envelope(projectId, { data: webhooks.map(webhookView) });
    },
  );

  app.delete(
    '/admin/v1/projects/:project_id/webhooks/:webhook_id',
    {
      schema: {
        summary: "Remove a project's webhook; its pending deliveries fail",
        params: Type.Object({ project_id: Type.String({ maxLength: 128 }), webhook_id: Type.String({ maxLength: 128 }) }),
        response: { 200: envelopeSchema({ deleted: Type.Literal(true) }), ...errorResponses },
      },
    },
    async (request) => {
      const { project_id: projectId, webhook_id: webhookId } = request.params;
      const audit = auditEvent(request, 'webhook.delete', projectId, null, ctx.now(), webhookId);
      if (!(await store.alerts.removeWebhook(projectId, webhookId, audit))) throw resourceNotFound('webhook', 'webhook_id');
      request.log.info({ project_id: projectId, webhook_id: webhookId }, 'webhook removed');
      return envelope(webhookId, { deleted: true as const });
    },
  );

  app.get(
    '/admin/v1/webhook-deliveries',
    {
      schema: {
        summary: 'Recent webhook deliveries, newest first, with their status',
        querystring: Type.Object(
          {
            limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 100 })),
            project_id: Type.Optional(Type.String({ maxLength: 128 })),
            status: Type.Optional(Type.Union([Type.Literal('pending'), Type.Literal('delivered'), Type.Literal('failed')])),
          },
          { additionalProperties: false },
        ),
        response: { 200: envelopeSchema({ data: Type.Array(DeliveryView) }), ...errorResponses },
      },
    },
    async (request) => {
      const { limit = 100, project_id: projectId, status } = request.query;
      // Filters apply to the newest deliveries the log keeps (RECENT_DELIVERIES_MAX).
      const recent = await store.alerts.recentDeliveries(projectId === undefined && status === undefined ? limit : 1000);
      const data = recent.filter((delivery: DeliveryRecord) => (projectId === undefined || delivery.project_id === projectId) && (status === undefined || delivery.status === status));
      return envelope('webhook_deliveries', { data: data.slice(0, limit) });
    },
  );
};
