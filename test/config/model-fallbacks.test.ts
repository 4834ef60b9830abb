import { describe, expect, it } from 'vitest';
import { parseConfigText } from '../../src/config/load-config.js';
import { ModelRegistry, upstreamPath } from '../../src/model-call/model-registry.js';

const yaml = (fallbacks: string) => `
models:
  - id: m
    upstream: http://a:8000/v1
    upstream_model: real-name
    timeout_ms: 5000
    fallbacks:
${fallbacks}
conversations:
  retention_seconds: 3600
`;

describe('models[].fallbacks and conversations config', () => {
  it('builds targets in order; a fallback inherits upstream_model and timeout_ms', async () => {
    const config = parseConfigText(yaml('      - upstream: http://b:8000/v1?x=1\n      - upstream: http://c/v1\n        upstream_model: other\n        api_key_env: K'), { K: 'secret' });
    expect(config.conversations).toEqual({ retention_seconds: 3600, max_messages: 1000, store_default: false, max_bytes_per_project: 52_428_800 });
    const registry = new ModelRegistry(config.models, { K: 'secret' });
    const targets = registry.get('m')!.targets;
    expect(targets.map((target) => (target.kind === 'http' ? [target.label, upstreamPath(target, '/chat/completions'), target.upstreamModel, target.timeoutMs, target.credential?.value] : []))).toEqual([
      ['a:8000', '/v1/chat/completions', 'real-name', 5000, undefined],
      ['b:8000', '/v1/chat/completions?x=1', 'real-name', 5000, undefined],
      ['c', '/v1/chat/completions', 'other', 5000, 'Bearer secret'],
    ]);
    await registry.close();
  });

  it('names the field of a bad fallback', () => {
    expect(() => parseConfigText(yaml('      - upstream: ftp://nope'))).toThrow(/models\[0\]\.fallbacks\[0\]\.upstream/);
    expect(() => parseConfigText(yaml('      - upstream: http://b/v1\n        api_key_env: UNSET_VAR_X'), {})).toThrow(
      /models\[0\]\.fallbacks\[0\]\.api_key_env.*UNSET_VAR_X/,
    );
    expect(() => parseConfigText(yaml('      - upstream: http://b/v1\n        colour: red'))).toThrow(/fallbacks\[0\]\.colour" is not a known field/);
  });
});
