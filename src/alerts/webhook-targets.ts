import { createHash } from 'node:crypto';
import { webhookSecretKey } from '../config/alert-webhooks.js';
import type { AlertWebhookConfig } from '../config/schema.js';
import { DEFAULT_ALERT_THRESHOLDS, type AlertEvent, type AlertStore, type WebhookFormat } from '../store/alert-types.js';

/** A webhook as deliveries use it: from the config (every project) or the project's own. */
export interface WebhookTarget {
  id: string;
  url: string;
  format: WebhookFormat;
  thresholds: number[];
  key: Buffer | null;
}

/** Config webhooks are named by their URL's hash, so reordering the file keeps deliveries pointed right. */
function configTargets(webhooks: AlertWebhookConfig[], env: NodeJS.ProcessEnv): WebhookTarget[] {
  return webhooks.map((webhook) => {
    const secret = webhook.secret_env === undefined ? undefined : env[webhook.secret_env];
    return {
      id: `cfg_${createHash('sha256').update(webhook.url).digest('hex').slice(0, 16)}`,
      url: webhook.url,
      format: webhook.format ?? 'standard',
      thresholds: webhook.thresholds ?? [...DEFAULT_ALERT_THRESHOLDS],
      key: secret ? webhookSecretKey(secret) : null,
    };
  });
}

export class WebhookTargets {
  private readonly fromConfig: WebhookTarget[];

  constructor(
    private readonly store: AlertStore,
    webhooks: AlertWebhookConfig[],
    env: NodeJS.ProcessEnv,
  ) {
    this.fromConfig = configTargets(webhooks, env);
  }

  private async all(projectId: string): Promise<WebhookTarget[]> {
    const own = (await this.store.listWebhooks(projectId)).map((webhook) => ({
      id: webhook.id,
      url: webhook.url,
      format: webhook.format,
      thresholds: webhook.thresholds,
      key: webhook.secret ? webhookSecretKey(webhook.secret) : null,
    }));
    return [...this.fromConfig, ...own];
  }

  /** The webhooks told of an event: a threshold crossing only those that list its threshold. */
  async matching(event: AlertEvent): Promise<WebhookTarget[]> {
    const targets = await this.all(event.project_id);
    if (event.type !== 'budget.threshold_crossed') return targets;
    const threshold = Number(event.data.threshold);
    return targets.filter((target) => target.thresholds.some((listed) => Math.abs(listed - threshold) < 1e-9));
  }

  /** One webhook by id, as it is now (null: removed since the event was fanned out). */
  async find(projectId: string, webhookId: string): Promise<WebhookTarget | null> {
    return (await this.all(projectId)).find((target) => target.id === webhookId) ?? null;
  }
}
