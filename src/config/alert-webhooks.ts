import type { AlertWebhookConfig } from './schema.js';

/** `whsec_` and the base64 of 24 to 64 random bytes, as the Standard Webhooks specification has it. */
const SECRET = /^whsec_([A-Za-z0-9+/]+={0,2})$/;

/** The key bytes of a Standard Webhooks secret, or null when it is not one. */
export function webhookSecretKey(secret: string): Buffer | null {
  const match = SECRET.exec(secret);
  if (!match) return null;
  const key = Buffer.from(match[1]!, 'base64');
  return key.length >= 24 && key.length <= 64 ? key : null;
}

/** Why a config webhook cannot be used, naming its field; null when it can. */
export function alertWebhookProblem(webhook: AlertWebhookConfig, index: number, env: NodeJS.ProcessEnv): string | null {
  const at = `alerts.webhooks[${index}]`;
  try {
    new URL(webhook.url);
  } catch {
    return `config field "${at}.url" is not a valid URL`;
  }
  if (webhook.format === 'slack') return null;
  if (webhook.secret_env === undefined) return `config field "${at}.secret_env" is required for format standard (the signing secret)`;
  const secret = env[webhook.secret_env];
  if (!secret) return `config field "${at}.secret_env" names the environment variable ${webhook.secret_env}, which is not set`;
  if (!webhookSecretKey(secret)) {
    return `config field "${at}.secret_env": the environment variable ${webhook.secret_env} is not a Standard Webhooks secret ("whsec_" and the base64 of 24 to 64 bytes)`;
  }
  return null;
}
