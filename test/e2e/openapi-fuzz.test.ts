import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { runSchemathesis, schemathesisCommand, type FuzzRun } from '../support/schemathesis.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
// Bounded so that CI stays short on a small machine; raise them for a deeper local pass.
const MAX_EXAMPLES = Number(process.env.NOVA_FUZZ_EXAMPLES ?? 40);
const SEED = Number(process.env.NOVA_FUZZ_SEED ?? 20261123);
// Bounds of each run: about twice what each took alone at 40 examples on a slow day (51 s, 8 s and 48 s;
// the admin routes grew with the console's), for the load of the whole suite around it.
const scaled = (ms: number) => Math.round((ms * Math.max(MAX_EXAMPLES, 40)) / 40);
const KEY_RUN_MS = scaled(100_000);
const LIMITS_RUN_MS = scaled(30_000);
const ADMIN_RUN_MS = scaled(100_000);
const HIGH_LIMITS = { requests_per_minute: 1_000_000, burst_limit: 1_000_000 };

/**
 * A property-based fuzz pass (schemathesis) over /openapi.json against the real process on
 * Redis with the echo model: no server error beyond the documented 502/503/504, and no
 * response that breaks its own schema, on every operation the schema lists.
 */
describe('fuzzing the OpenAPI schema', () => {
  let gateway: GatewayProcess;
  let project: TestProject;
  let limitsProject: TestProject;

  // The suite's first run on a machine makes the Python tools' virtualenv here, with time for pip (a
  // minute or more); when that fails (what to install), each fuzz test fails with it, counted as failed.
  beforeAll(() => schemathesisCommand().catch(() => undefined), 600_000);

  beforeAll(async () => {
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' },
      configYaml: `
models:
  - id: echo-1
    provider: echo
redis:
  key_prefix: e2e${randomBase62(8)}
`,
    });
    project = await gateway.createProject({ name: 'fuzzed', ...HIGH_LIMITS });
    limitsProject = await gateway.createProject({ name: 'fuzzed limits', ...HIGH_LIMITS });
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  const expectClean = ({ exitCode, report, output }: FuzzRun) => {
    const context = `schemathesis output:\n${output}`;
    expect(report.failures, context).toEqual([]);
    expect(report.errors, context).toEqual([]);
    expect(report.test_cases.with_failures, context).toBe(0);
    expect(report.complete, context).toBe(true);
    expect(report.operations.selected).toBeGreaterThan(0);
    expect(report.operations.tested).toBe(report.operations.selected);
    expect(report.test_cases.generated).toBeGreaterThanOrEqual(report.operations.selected * 10);
    expect(exitCode, context).toBe(0);
  };

  it('finds nothing on the project-key routes', { timeout: KEY_RUN_MS + 5000 }, async () => {
    const run = await runSchemathesis({
      url: gateway.url,
      authorization: project.auth.authorization,
      parameters: { 'path.project_id': project.projectId, 'query.project_id': project.projectId },
      // The rate-limit patch would throttle the rest of the run; it has a project of its own below.
      excludePath: '^/admin|/rate-limits$',
      maxExamples: MAX_EXAMPLES,
      seed: SEED,
      timeoutMs: KEY_RUN_MS,
    });
    expectClean(run);
    expect(run.report.operations.selected).toBeGreaterThanOrEqual(15);
  });

  it('finds nothing on the rate-limit policy route', { timeout: LIMITS_RUN_MS + 5000 }, async () => {
    expectClean(
      await runSchemathesis({
        url: gateway.url,
        authorization: limitsProject.auth.authorization,
        parameters: { 'path.project_id': limitsProject.projectId },
        includePath: '/rate-limits$',
        maxExamples: MAX_EXAMPLES,
        seed: SEED,
        timeoutMs: LIMITS_RUN_MS,
      }),
    );
  });

  it('finds nothing on the admin routes', { timeout: ADMIN_RUN_MS + 5000 }, async () => {
    const run = await runSchemathesis({
      url: gateway.url,
      authorization: `Bearer ${ADMIN_TOKEN}`,
      parameters: { 'path.project_id': project.projectId },
      includePath: '^/admin',
      maxExamples: MAX_EXAMPLES,
      seed: SEED,
      timeoutMs: ADMIN_RUN_MS,
    });
    expectClean(run);
    expect(run.report.operations.selected).toBeGreaterThanOrEqual(5);
  });

  it('leaked no secret into the log', () => {
    for (const secret of [project.secret, limitsProject.secret, ADMIN_TOKEN]) {
      expect(gateway.logs.some((line) => line.includes(secret))).toBe(false);
    }
  });
});
