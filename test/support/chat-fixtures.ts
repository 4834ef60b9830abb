import type { FastifyInstance } from 'fastify';
import { defaultConfig, type GatewayConfig } from '../../src/config/gateway-config.js';
import type { ModelConfig } from '../../src/config/schema.js';
import type { LoopbackUpstream } from './loopback-upstream.js';

export { RecordingUsageMeter } from './recording-usage.js';

export const UPSTREAM_KEY_ENV = 'FAKE_UPSTREAM_KEY';
export const UPSTREAM_KEY = 'sk-upstream-secret-0123456789';

/** A config whose models point at scenarios of the loopback upstream. */
export function chatConfig(upstream: Pick<LoopbackUpstream, 'baseUrl'>, models: ModelConfig[] = [], extra: Partial<GatewayConfig> = {}): GatewayConfig {
  const config = defaultConfig({
    models: [
      { id: 'echo-1', provider: 'echo', context_window: 8192, max_output_tokens: 1024 },
      {
        id: 'fake-1',
        upstream: upstream.baseUrl('default'),
        upstream_model: 'fake/model-1',
        api_key_env: UPSTREAM_KEY_ENV,
        timeout_ms: 2000,
        context_window: 32768,
        max_output_tokens: 4096,
      },
      ...models,
    ],
  });
  return { ...config, ...extra };
}

export const chatEnv = { [UPSTREAM_KEY_ENV]: UPSTREAM_KEY };

export async function chat(app: FastifyInstance, auth: { authorization: string }, payload: Record<string, unknown>, headers: Record<string, string> = {}) {
  return app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...auth, ...headers }, payload });
}

/** The data payloads of an SSE body, `[DONE]` included. */
export function sseData(text: string): string[] {
  return text
    .split('\n\n')
    .filter((event) => event.trim() !== '')
    .map((event) => event.replace(/^data: /, ''));
}

export function streamedText(text: string): string {
  return sseData(text)
    .filter((data) => data !== '[DONE]')
    .map((data) => (JSON.parse(data) as { choices: Array<{ delta?: { content?: string } }> }).choices[0]?.delta?.content ?? '')
    .join('');
}
