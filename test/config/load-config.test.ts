import { fullPolicy } from '../../src/store/policy.js';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readProcessSettings } from '../../src/config/env.js';
import { ConfigError, loadConfigFile, parseConfigText } from '../../src/config/load-config.js';

const valid = `
models:
  - id: echo-1
    provider: echo
  - id: llama
    upstream: http://127.0.0.1:9/v1
    api_key_env: LLAMA_KEY
defaults:
  rate_limits: { requests_per_minute: 10, burst_limit: 2 }
`;

describe('config file', () => {
  it('loads the shipped default config with the echo model', async () => {
    const config = await loadConfigFile('config/gateway.yaml');
    expect(config.models.map((model) => model.id)).toContain('echo-1');
    expect(config.defaults.rate_limits).toEqual(fullPolicy({ requests_per_minute: 600, burst_limit: 100 }));
  });

  it('loads the example config when its key variable is set', async () => {
    const config = await loadConfigFile('config/example-vllm.yaml', { VLLM_API_KEY: 'x' });
    expect(config.models).toHaveLength(2);
  });

  it('fills defaults', () => {
    const config = parseConfigText(valid, { LLAMA_KEY: 'k' });
    expect(config.defaults.rate_limits).toEqual(fullPolicy({ requests_per_minute: 10, burst_limit: 2 }));
    expect(config.server.body_limit_bytes).toBe(1024 * 1024);
    expect(config.auth.cache_ttl_ms).toBe(10_000);
  });

  it.each([
    ['a misspelled field', valid.replace('provider: echo', 'provder: echo'), /"models\[0\]\.provder" is not a known field/],
    ['a wrong type', valid.replace('requests_per_minute: 10', 'requests_per_minute: ten'), /"defaults\.rate_limits\.requests_per_minute"/],
    ['a missing model list', 'defaults: {}', /"models"/],
    ['both provider and upstream', valid.replace('provider: echo', 'provider: echo\n    upstream: http://x/v1'), /"models\[0\]" must set exactly one/],
    ['a repeated id', valid.replace('id: llama', 'id: echo-1'), /"models\[1\]\.id" repeats/],
    ['an unset key variable', valid, /"models\[1\]\.api_key_env" names the environment variable LLAMA_KEY/],
    ['${VAR} substitution', valid.replace('http://127.0.0.1:9/v1', '${UPSTREAM}'), /\$\{VAR\}/],
    ['invalid YAML', 'models: [', /not valid YAML/],
    ['an unknown endpoint', valid.replace('provider: echo', 'provider: echo\n    endpoints: [video]'), /"models\[0\]\.endpoints\[0\]"/],
  ])('refuses %s, naming the field', (_name, text, message) => {
    expect(() => parseConfigText(text, {})).toThrow(ConfigError);
    expect(() => parseConfigText(text, {})).toThrow(message);
  });

  it('refuses a missing file with its path', async () => {
    await expect(loadConfigFile('/nonexistent/gateway.yaml')).rejects.toThrow(/cannot read config file \/nonexistent\/gateway.yaml/);
  });

  it('ships a default config that names only the echo model', () => {
    expect(readFileSync('config/gateway.yaml', 'utf8')).toMatch(/provider: echo/);
  });
});

describe('environment variables', () => {
  it('have the documented defaults', () => {
    expect(readProcessSettings({})).toEqual({
      host: '0.0.0.0',
      port: 8080,
      metricsPort: 9464,
      redisUrl: undefined,
      redisMode: 'standalone',
      configPath: 'config/gateway.yaml',
      adminToken: undefined,
      logLevel: 'info',
      drainTimeoutMs: undefined,
    });
  });

  it.each([
    [{ PORT: 'eighty' }, /PORT/],
    [{ METRICS_PORT: '70000' }, /METRICS_PORT/],
    [{ REDIS_URL: 'http://redis:6379' }, /REDIS_URL/],
    [{ REDIS_MODE: 'sentinel-ish' }, /REDIS_MODE/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ NOVA_ADMIN_TOKEN: 'short' }, /NOVA_ADMIN_TOKEN/],
    [{ NOVA_DRAIN_TIMEOUT_MS: '-1' }, /NOVA_DRAIN_TIMEOUT_MS/],
  ])('refuses %o naming the variable', (env, message) => {
    expect(() => readProcessSettings(env)).toThrow(message);
  });

  it('never echoes the value of a bad variable', () => {
    expect(() => readProcessSettings({ REDIS_URL: 'http://user:hunter2@redis' })).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('hunter2') }),
    );
  });
});
