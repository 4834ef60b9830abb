import { readFile } from 'node:fs/promises';
import type { ErrorObject } from 'ajv';
import { parse as parseYaml } from 'yaml';
import { checkConfig, completeConfig, type GatewayConfig } from './gateway-config.js';
import { alertWebhookProblem } from './alert-webhooks.js';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

function fieldOf(error: ErrorObject): string {
  const path = error.instancePath
    .split('/')
    .filter(Boolean)
    .map((part) => (/^\d+$/.test(part) ? `[${part}]` : `.${part}`))
    .join('')
    .replace(/^\./, '');
  const extra =
    error.keyword === 'required'
      ? (error.params as { missingProperty: string }).missingProperty
      : error.keyword === 'additionalProperties'
        ? (error.params as { additionalProperty: string }).additionalProperty
        : undefined;
  if (extra === undefined) return path || '(root)';
  return path ? `${path}.${extra}` : extra;
}

/** Validates a parsed config object and fills in its defaults (in a copy); throws a ConfigError naming the offending field. */
export function validateConfig(input: unknown, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  const filled = structuredClone(input);
  if (!checkConfig(filled)) {
    const error = checkConfig.errors![0]!;
    const reason = error.keyword === 'additionalProperties' ? 'is not a known field' : error.message;
    throw new ConfigError(`config field "${fieldOf(error)}" ${reason}`);
  }
  const seen = new Set<string>();
  const aliased = new Map<string, string>();
  filled.models.forEach((model, index) => {
    const at = `models[${index}]`;
    if (seen.has(model.id)) throw new ConfigError(`config field "${at}.id" repeats the model id "${model.id}"`);
    seen.add(model.id);
    model.aliases?.forEach((alias, n) => {
      const other = aliased.get(alias);
      if (other !== undefined) throw new ConfigError(`config field "${at}.aliases[${n}]" is already an alias of the model "${other}"`);
      aliased.set(alias, model.id);
    });
    if (model.api === 'anthropic' && (model.endpoints ?? ['chat']).some((endpoint) => endpoint !== 'messages')) {
      throw new ConfigError(`config field "${at}.endpoints" may only list "messages" for a model with api: anthropic (the gateway does not translate other routes to it)`);
    }
    if (model.api !== undefined && model.provider === 'echo') {
      throw new ConfigError(`config field "${at}.api" applies to an upstream, not to the echo provider`);
    }
    if ([model.provider, model.upstream, model.targets].filter((set) => set !== undefined).length !== 1) {
      throw new ConfigError(`config field "${at}" must set exactly one of "provider", "upstream" or "targets"`);
    }
    if (model.provider === 'echo' && (model.balance ?? model.health ?? model.queue ?? model.priority_param) !== undefined) {
      throw new ConfigError(`config field "${at}" sets balance, health, queue or priority_param, which apply to "targets", not to the echo provider`);
    }
    if (model.upstream !== undefined) {
      try {
        new URL(model.upstream);
      } catch {
        throw new ConfigError(`config field "${at}.upstream" is not a valid URL`);
      }
    }
    if (model.api_key_env !== undefined && !env[model.api_key_env]) {
      throw new ConfigError(`config field "${at}.api_key_env" names the environment variable ${model.api_key_env}, which is not set`);
    }
    if (model.provider === 'echo' && model.endpoints?.some((endpoint) => endpoint !== 'chat' && endpoint !== 'messages')) {
      throw new ConfigError(`config field "${at}.endpoints" may only list "chat" and "messages" for the echo provider`);
    }
    if (model.fallbacks?.length && model.provider === 'echo') {
      throw new ConfigError(`config field "${at}.fallbacks" needs "upstream" or "targets": the echo provider has no fallbacks`);
    }
    const checkTarget = (target: { upstream: string; api_key_env?: string }, field: string) => {
      try {
        new URL(target.upstream);
      } catch {
        throw new ConfigError(`config field "${at}.${field}.upstream" is not a valid URL`);
      }
      if (target.api_key_env !== undefined && !env[target.api_key_env]) {
        throw new ConfigError(`config field "${at}.${field}.api_key_env" names the environment variable ${target.api_key_env}, which is not set`);
      }
    };
    model.targets?.forEach((target, n) => checkTarget(target, `targets[${n}]`));
    model.fallbacks?.forEach((fallback, n) => checkTarget(fallback, `fallbacks[${n}]`));
  });
  filled.models.forEach((model, index) => {
    model.aliases?.forEach((alias, n) => {
      if (seen.has(alias)) throw new ConfigError(`config field "models[${index}].aliases[${n}]" is the id of a configured model`);
    });
  });
  filled.alerts.webhooks.forEach((webhook, index) => {
    const problem = alertWebhookProblem(webhook, index, env);
    if (problem) throw new ConfigError(problem);
  });
  const config = completeConfig(filled);
  if (config.server.headers_timeout_ms > config.server.body_timeout_ms) {
    throw new ConfigError('config field "server.headers_timeout_ms" must not exceed "server.body_timeout_ms" (the headers are part of the request)');
  }
  return config;
}

export function parseConfigText(text: string, env: NodeJS.ProcessEnv = process.env): GatewayConfig {
  if (text.includes('${')) {
    throw new ConfigError('config may not contain ${VAR} substitutions: pass secrets through the *_env fields');
  }
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (error) {
    throw new ConfigError(`config is not valid YAML: ${(error as Error).message}`);
  }
  return validateConfig(parsed, env);
}

export async function loadConfigFile(path: string, env: NodeJS.ProcessEnv = process.env): Promise<GatewayConfig> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigError(`cannot read config file ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`);
  }
  return parseConfigText(text, env);
}
