import { createHmac } from 'node:crypto';
import type { AlertEvent, WebhookFormat } from '../store/alert-types.js';

/** The request a delivery sends: body and headers, per the webhook's format. */
export interface WebhookMessage {
  body: string;
  headers: Record<string, string>;
}

/** Standard Webhooks: `v1,` and the base64 HMAC-SHA256 of `id.timestamp.body` under the secret's key bytes. */
export function standardSignature(key: Buffer, messageId: string, timestampSeconds: number, body: string): string {
  return `v1,${createHmac('sha256', key).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64')}`;
}

function percent(fraction: number): string {
  return `${Math.round(fraction * 1000) / 10}%`;
}

/** One line a person reads in a Slack channel. */
export function slackText(event: AlertEvent): string {
  const data = event.data;
  if (event.type === 'budget.threshold_crossed') {
    const subject = data.api_key_id ? `API key ${String(data.api_key_id)} of project ${event.project_id}` : `Project ${event.project_id}`;
    return `Budget alert: ${subject} has used ${percent(Number(data.threshold))} of its ${String(data.budget)} budget for ${String(data.period)} (${String(data.used)} of ${String(data.limit)}).`;
  }
  if (event.type === 'api_key.expiring') {
    const days = Number(data.days_left) === 1 ? '1 day' : `${String(data.days_left)} days`;
    return `API key "${String(data.name)}" (${String(data.api_key_id)}) of project ${event.project_id} expires in ${days}, at ${String(data.expires_at)}.`;
  }
  return `${event.type} for project ${event.project_id}`;
}

/**
 * The message of one attempt. The webhook id is the event id, the same on every retry, so a
 * receiver can drop a repeat (delivery is at least once).
 */
export function webhookMessage(event: AlertEvent, format: WebhookFormat, key: Buffer | null, nowMs: number): WebhookMessage {
  if (format === 'slack') {
    return { body: JSON.stringify({ text: slackText(event) }), headers: { 'content-type': 'application/json' } };
  }
  const body = JSON.stringify({ type: event.type, timestamp: event.created_at, data: event.data });
  const timestamp = Math.floor(nowMs / 1000);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'webhook-id': event.id, 'webhook-timestamp': String(timestamp) };
  if (key) headers['webhook-signature'] = standardSignature(key, event.id, timestamp, body);
  return { body, headers };
}
