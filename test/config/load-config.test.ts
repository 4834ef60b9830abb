import { fullPolicy } from '../../src/store/policy.js';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { readProcessSettings } from '../../src/config/env.js';
import { defaultConfig } from '../../src/config/gateway-config.js';
import { ConfigError, loadConfigFile, parseConfigText } from '../../src/config/load-config.js';
import { GatewayConfigSchema } from '../../src/config/schema.js';
import { ModelRegistry } from '../../src/model-call/model-registry.js';

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

  it('fills every default the schema names, inside sections the file left out too', () => {
    type Node = { properties?: Record<string, Node>; default?: unknown };
    const missing: string[] = [];
    const visit = (schema: Node, value: Record<string, unknown>, path: string) => {
      for (const [key, field] of Object.entries(schema.properties ?? {})) {
        const inner = value[key];
        if ('default' in field && inner === undefined) missing.push(path + key);
        if (typeof inner === 'object' && inner !== null) visit(field, inner as Record<string, unknown>, `${path}${key}.`);
      }
    };
    const config = defaultConfig();
    visit(GatewayConfigSchema as Node, config, '');
    expect(missing).toEqual([]);
    expect(config.ceilings).toEqual({ requests_per_minute: 10_000, burst_limit: 10_000, tokens_per_minute: 2_000_000 });
    expect(config.auth.failed_attempts).toEqual({ max: 30, window_seconds: 60, block_seconds: 60 });
  });

  it('does not change the object it fills defaults into', () => {
    const server = { body_limit_bytes: 2048 };
    expect(defaultConfig({ server }).server.json_max_depth).toBe(64);
    expect(server).toEqual({ body_limit_bytes: 2048 });
  });

  it('fills the client limits; a shorter body timeout lowers the default headers timeout', () => {
    const env = { LLAMA_KEY: 'k' };
    expect(parseConfigText(valid, env).server).toMatchObject({
      headers_timeout_ms: 10_000,
      body_timeout_ms: 60_000,
      keep_alive_timeout_ms: 72_000,
      max_connections_per_address: 1024,
      json_max_depth: 64,
    });
    expect(parseConfigText(`${valid}server: { body_timeout_ms: 4000 }\n`, env).server.headers_timeout_ms).toBe(4000);
    expect(() => parseConfigText(`${valid}server: { headers_timeout_ms: 5000, body_timeout_ms: 4000 }\n`, env)).toThrow(
      /"server\.headers_timeout_ms" must not exceed "server\.body_timeout_ms"/,
    );
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
    [
      'a negative price',
      valid.replace('provider: echo', 'provider: echo\n    pricing: { input_per_million: -1, output_per_million: 1 }'),
      /"models\[0\]\.pricing\.input_per_million" must be >= 0/,
    ],
    [
      'a price that is not a number',
      valid.replace('provider: echo', 'provider: echo\n    pricing: { input_per_million: 1, output_per_million: cheap }'),
      /"models\[0\]\.pricing\.output_per_million" must be number/,
    ],
    [
      'a price given as a string',
      valid.replace('provider: echo', 'provider: echo\n    pricing: { input_per_million: "2.5", output_per_million: 1 }'),
      /"models\[0\]\.pricing\.input_per_million" must be number/,
    ],
    ['half a price', valid.replace('provider: echo', 'provider: echo\n    pricing: { input_per_million: 1 }'), /"models\[0\]\.pricing\.output_per_million"/],
    [
      "a fallback's negative price",
      valid.replace('api_key_env: LLAMA_KEY', 'fallbacks:\n      - upstream: http://127.0.0.1:9/v1\n        pricing: { input_per_million: 1, output_per_million: -0.5 }'),
      /"models\[1\]\.fallbacks\[0\]\.pricing\.output_per_million" must be >= 0/,
    ],
  ])('refuses %s, naming the field', (_name, text, message) => {
    expect(() => parseConfigText(text, {})).toThrow(ConfigError);
    expect(() => parseConfigText(text, {})).toThrow(message);
  });

  it("gives every target its pricing: the model's, or a fallback's own", () => {
    const config = parseConfigText(
      valid.replace(
        'api_key_env: LLAMA_KEY',
        'pricing: { input_per_million: 2.5, output_per_million: 10 }\n    fallbacks:\n      - upstream: http://127.0.0.1:8/v1\n      - upstream: http://127.0.0.1:7/v1\n        pricing: { input_per_million: 0, output_per_million: 0.6 }',
      ).replace('provider: echo', 'provider: echo\n    pricing: { input_per_million: 0.1, output_per_million: 0.2 }'),
      {},
    );
    const registry = new ModelRegistry(config.models);
    try {
      expect(registry.get('echo-1')!.targets.map((target) => target.pricing)).toEqual([{ inputPerMillion: 0.1, outputPerMillion: 0.2 }]);
      expect(registry.get('llama')!.targets.map((target) => target.pricing)).toEqual([
        { inputPerMillion: 2.5, outputPerMillion: 10 },
        { inputPerMillion: 2.5, outputPerMillion: 10 },
        { inputPerMillion: 0, outputPerMillion: 0.6 },
      ]);
    } finally {
      void registry.close();
    }
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
      redisSentinelMaster: undefined,
      redisSentinelPassword: undefined,
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
    [{ REDIS_MODE: 'sentinel', REDIS_URL: 'redis://127.0.0.1:26379' }, /REDIS_SENTINEL_MASTER/],
    [{ REDIS_MODE: 'sentinel', REDIS_SENTINEL_MASTER: 'nova' }, /REDIS_URL/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL/],
    [{ NOVA_ADMIN_TOKEN: 'short' }, /NOVA_ADMIN_TOKEN/],
    [{ NOVA_DRAIN_TIMEOUT_MS: '-1' }, /NOVA_DRAIN_TIMEOUT_MS/],
    [{ NOVA_DRAIN_TIMEOUT_MS: '1.5' }, /environment variable NOVA_DRAIN_TIMEOUT_MS must be a whole number of milliseconds/],
    [{ PORT: '65536' }, /environment variable PORT must be a port number 0\.\.65535/],
  ])('refuses %o naming the variable', (env, message) => {
    expect(() => readProcessSettings(env)).toThrow(message);
  });

  it('reads numbers as numbers; an empty variable is unset', () => {
    expect(readProcessSettings({ PORT: '8081', METRICS_PORT: '0', NOVA_DRAIN_TIMEOUT_MS: '5000', LOG_LEVEL: '', HOST: '' })).toMatchObject({
      port: 8081,
      metricsPort: 0,
      drainTimeoutMs: 5000,
      logLevel: 'info',
      host: '0.0.0.0',
    });
  });

  it('reads the sentinel settings', () => {
    const env = { REDIS_MODE: 'sentinel', REDIS_URL: 'redis://127.0.0.1:26379,redis://127.0.0.1:26380', REDIS_SENTINEL_MASTER: 'nova' };
    expect(readProcessSettings(env)).toMatchObject({ redisMode: 'sentinel', redisSentinelMaster: 'nova', redisSentinelPassword: undefined });
  });

  it('never echoes the value of a bad variable', () => {
    expect(() => readProcessSettings({ REDIS_URL: 'http://user:hunter2@redis' })).toThrow(
      expect.objectContaining({ message: expect.not.stringContaining('hunter2') }),
    );
  });
});
