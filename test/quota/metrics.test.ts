import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { burst, ECHO_CHAT } from '../support/quota-traffic.js';
import { ADMIN_TOKEN, buildTestApp, createProject, type TestProject } from '../support/test-app.js';

/** The value of one series in a Prometheus text exposition (0 when absent). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([key, value]) => `${key}="${value}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labelText = line.startsWith(`${name}{`) ? line.slice(name.length + 1, line.indexOf('}')) : '';
    const have = labelText ? labelText.split(/,(?=\w+=")/) : [];
    if (wanted.length === have.length && wanted.every((label) => have.includes(label))) return Number(line.split(' ').at(-1));
  }
  return 0;
}

describe('Prometheus /metrics on METRICS_PORT (real process)', () => {
  let gateway: GatewayProcess;
  let project: TestProject;

  beforeAll(async () => {
    gateway = await GatewayProcess.start({ env: { REDIS_URL: '', NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' } });
    project = await gateway.createProject({ name: 'metrics', requests_per_minute: 5, burst_limit: 2 });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('counts the traffic sent: requests, refusals, HTTP by route and status, key cache, usage', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 10; i++) {
      const response = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...project.auth, 'content-type': 'application/json' },
        body: JSON.stringify(ECHO_CHAT),
      });
      statuses.push(response.status);
    }
    const missing = await fetch(`${gateway.url}/v1/chat/completions`, { method: 'POST' });
    expect(missing.status).toBe(401);
    expect(statuses.filter((status) => status === 200)).toHaveLength(7);
    expect(statuses.filter((status) => status === 429)).toHaveLength(3);

    const response = await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(/^text\/plain/);
    const text = await response.text();
    const p = { project_id: project.projectId };
    expect(sample(text, 'nova_usage_requests_total', p)).toBe(7);
    expect(sample(text, 'nova_rate_limit_refusals_total', { ...p, limit: 'requests' })).toBe(3);
    expect(sample(text, 'nova_rate_limit_decisions_total', { result: 'admitted', source: 'store' })).toBe(7);
    expect(sample(text, 'nova_rate_limit_decisions_total', { result: 'refused', source: 'store' })).toBe(3);
    const route = { method: 'POST', route: '/v1/chat/completions' };
    expect(sample(text, 'nova_http_requests_total', { ...route, status_code: '200' })).toBe(7);
    expect(sample(text, 'nova_http_requests_total', { ...route, status_code: '429' })).toBe(3);
    expect(sample(text, 'nova_http_requests_total', { ...route, status_code: '401' })).toBe(1);
    expect(sample(text, 'nova_http_request_duration_seconds_count', { ...route, status_code: '200' })).toBe(7);
    expect(sample(text, 'nova_http_requests_total', { method: 'POST', route: '/admin/v1/projects', status_code: '200' })).toBe(1);
    // The first request missed the key cache, the other nine hit it; the keyless one never got there.
    expect(sample(text, 'nova_auth_key_cache_misses_total')).toBe(1);
    expect(sample(text, 'nova_auth_key_cache_hits_total')).toBe(9);
    expect(sample(text, 'nova_auth_failures_total', { reason: 'missing' })).toBe(1);
    expect(sample(text, 'nova_usage_buffered_records')).toBeGreaterThanOrEqual(0);
    expect(text).toContain('process_cpu_user_seconds_total');
    expect(text).toContain('nodejs_eventloop_lag_seconds');
    // Secrets never appear, not even redacted.
    expect(text).not.toContain(project.secret);
    expect(text).not.toContain('nova_sk_');
    expect((await fetch(`http://127.0.0.1:${gateway.metricsPort}/other`)).status).toBe(404);
    // Not on the main port when METRICS_PORT is set.
    expect((await fetch(`${gateway.url}/metrics`)).status).toBe(404);
  });
});

describe('/metrics on the main port (METRICS_PORT=0) and without the project label', () => {
  it('serves /metrics from the app and drops project_id when metrics.project_label is false', async () => {
    const t = await buildTestApp('memory', {
      config: defaultConfig({ metrics: { project_label: false } }),
      deps: { serveMetrics: true },
    });
    try {
      const project = await createProject(t.app, { name: 'p', requests_per_minute: 2, burst_limit: 0 });
      expect((await burst([t.app], project, 3)).admitted).toBe(2);
      const tokens = (text: string, type: string) => sample(text, 'nova_usage_tokens_total', { gen_ai_request_model: 'echo-1', type });
      const before = (await t.app.inject({ url: '/metrics' })).body;
      t.ctx.usage.record({ projectId: project.projectId, requestId: 'req_x', model: 'echo-1', promptTokens: 4, completionTokens: 6, cachedPromptTokens: 3, reasoningTokens: 2, cost: 0.25 });
      const response = await t.app.inject({ url: '/metrics' });
      expect(response.statusCode).toBe(200);
      const text = response.body;
      expect(tokens(text, 'prompt') - tokens(before, 'prompt')).toBe(4);
      expect(tokens(text, 'completion') - tokens(before, 'completion')).toBe(6);
      // The parts have a metric of their own: a sum over the types of nova_usage_tokens_total stays the total.
      expect(tokens(text, 'cached_prompt')).toBe(0);
      const details = (type: string) => sample(text, 'nova_usage_token_details_total', { gen_ai_request_model: 'echo-1', type });
      expect(details('cached_prompt')).toBe(3);
      expect(details('reasoning')).toBe(2);
      expect(sample(text, 'nova_usage_requests_total')).toBe(2);
      expect(sample(text, 'nova_rate_limit_refusals_total', { limit: 'requests' })).toBe(1);
      expect(sample(text, 'nova_usage_cost_dollars_total', { gen_ai_request_model: 'echo-1' })).toBe(0.25);
      expect(text).not.toContain(project.projectId);
      expect(text).not.toContain('project_id=');
    } finally {
      await t.close();
    }
  });
});
