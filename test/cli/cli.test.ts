import { spawn } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { KEY_LIMIT_FLAGS, USAGE_BUCKET_WIDTHS } from '../../src/cli/commands.js';
import { BUCKET_WIDTHS } from '../../src/routes/management/usage-query.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { freePort } from '../support/redis-server.js';
import { ADMIN_TOKEN } from '../support/test-app.js';

const ROOT = new URL('../../', import.meta.url).pathname;
/** For tests of many CLI runs: each is its own Node process with tsx, about a second on a busy machine. */
const CLI_STEPS_TIMEOUT_MS = 90_000;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The CLI as a user runs it: its own process, settings from env and flags. */
function cli(args: string[], env: Record<string, string> = {}): Promise<Run> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/bin.ts', ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

describe('nova-gateway CLI against the running gateway', () => {
  let gateway: GatewayProcess;
  let admin: Record<string, string>;
  let projectId: string;
  let secret: string;
  let defaultKeyId: string;

  beforeAll(async () => {
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN, LOG_LEVEL: 'warn' },
      // Alerts scan and poll often, so a key near its expiry makes a delivery for `webhooks deliveries`.
      configYaml:
        `models:\n  - id: echo-1\n    provider: echo\nredis:\n  key_prefix: cli-${Date.now()}\nusage:\n  flush_interval_ms: 100\n` +
        'alerts:\n  expiry_scan_interval_ms: 200\n  poll_interval_ms: 50\n',
    });
    admin = { NOVA_URL: gateway.url, NOVA_ADMIN_TOKEN: ADMIN_TOKEN };
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('projects create: prints the project and its first key secret once', async () => {
    const human = await cli(['projects', 'create', 'cli human', '--environment', 'staging'], admin);
    expect(human.code).toBe(0);
    expect(human.stdout).toMatch(/^project proj_\w+\n {2}name: {8}cli human\n {2}environment: staging\n/);
    expect(human.stdout).toMatch(/first API key key_\w+ \(default\)\nsecret: nova_sk_\w+/);

    const json = await cli(['projects', 'create', 'cli', '--requests-per-minute', '600', '--burst-limit', '10', '--json'], admin);
    expect(json.code).toBe(0);
    const project = JSON.parse(json.stdout);
    expect(project).toMatchObject({ name: 'cli', rate_limits: { requests_per_minute: 600, burst_limit: 10 } });
    projectId = project.id;
    secret = project.api_key.secret;
    defaultKeyId = project.api_key.id;
  });

  it('takes the URL and token from flags as well as env', async () => {
    const run = await cli(['--url', gateway.url, '--admin-token', ADMIN_TOKEN, 'keys', 'create', projectId, 'from flags']);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^created API key key_\w+ \(from flags\) in proj_/);
  });

  it('keys create / list / rotate / revoke', async () => {
    const project = { NOVA_URL: gateway.url, NOVA_API_KEY: secret };
    const created = JSON.parse((await cli(['keys', 'create', projectId, 'ci', '--json'], admin)).stdout);
    expect(created.secret).toMatch(/^nova_sk_/);

    const list = await cli(['keys', 'list', projectId], project);
    expect(list.code).toBe(0);
    const [header, rule, ...rows] = list.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^id\s+name\s+key\s+created_at\s+expires_at\s+last_used_at$/);
    expect(rule).toMatch(/^-+( +-+){5}$/);
    expect(rows.map((row) => row.split(/\s{2,}/)[1])).toEqual(['ci', 'from flags', 'default']);
    expect(list.stdout).not.toContain(created.secret);

    const rotated = await cli(['keys', 'rotate', defaultKeyId, '--grace-period', '60', '--json'], project);
    expect(rotated.code).toBe(0);
    const rotation = JSON.parse(rotated.stdout);
    expect(rotation.secret).not.toBe(secret);
    expect(rotation.previous_secret_expires_at).not.toBeNull();
    secret = rotation.secret;

    const revoked = await cli(['keys', 'revoke', created.id], { NOVA_URL: gateway.url, NOVA_API_KEY: secret });
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toMatch(new RegExp(`^revoked API key ${created.id} \\(ci\\) at \\d{4}-`));
    const after = await cli(['keys', 'list', projectId, '--json'], { NOVA_URL: gateway.url, NOVA_API_KEY: secret });
    expect(JSON.parse(after.stdout).data.map((key: { name: string }) => key.name)).toEqual(['from flags', 'default']);
  });

  it('keys create / get / update carry scopes, models and metadata; a key creates keys within its own', async () => {
    const project = JSON.parse((await cli(['projects', 'create', 'cli governed', '--json'], admin)).stdout);
    const root = { NOVA_URL: gateway.url, NOVA_API_KEY: project.api_key.secret };
    const create = await cli(
      ['keys', 'create', project.id, 'agent', '--scope', 'model', '--scope', 'keys:read,keys:write', '--model', 'echo-*', '--metadata', 'owner=ana', '--metadata', 'team=search', '--json'],
      admin,
    );
    expect(create.code, create.stderr).toBe(0);
    const agent = JSON.parse(create.stdout);
    expect(agent).toMatchObject({ scopes: ['model', 'keys:read', 'keys:write'], models: ['echo-*'], metadata: { owner: 'ana', team: 'search' } });

    const shown = await cli(['keys', 'get', agent.id], root);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('  scopes:     model, keys:read, keys:write\n');
    expect(shown.stdout).toContain('  models:     echo-*\n');
    expect(shown.stdout).toContain('  metadata:   owner=ana, team=search\n');

    const updated = await cli(['keys', 'update', agent.id, '--scope', 'keys:read', '--scope', 'keys:write', '--all-models', '--metadata', 'owner=bo'], root);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toMatch(/^updated API key key_\w+ \(agent\)\n/);
    expect(updated.stdout).toContain('  models:     all\n');
    expect(updated.stdout).toContain('  metadata:   owner=bo\n');

    // Created by the agent's own key: its scopes by default, never more.
    const agentEnv = { NOVA_URL: gateway.url, NOVA_API_KEY: agent.secret };
    const child = JSON.parse((await cli(['keys', 'create', project.id, 'child', '--json'], agentEnv)).stdout);
    expect(child.scopes).toEqual(['keys:read', 'keys:write']);
    const refused = await cli(['keys', 'create', project.id, 'escalated', '--scope', 'model'], agentEnv);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain("lacks the scope 'model'. (403 insufficient_scope, param: scopes)");

    const nothing = await cli(['keys', 'update', agent.id], root);
    expect(nothing.code).toBe(2);
    const badMetadata = await cli(['keys', 'update', agent.id, '--metadata', 'owner'], root);
    expect(badMetadata.code).toBe(2);
    expect(badMetadata.stderr).toContain('--metadata takes key=value');
  });

  it("keys create / update set a key's own limits and budgets; keys get shows them with what the budgets hold", async () => {
    const project = JSON.parse((await cli(['projects', 'create', 'cli limits', '--json'], admin)).stdout);
    const root = { NOVA_URL: gateway.url, NOVA_API_KEY: project.api_key.secret };
    const limits = ['--requests-per-minute', '60', '--burst-limit', '5', '--tokens-per-minute', '20000', '--max-concurrent-requests', '2'];
    const create = await cli(['keys', 'create', project.id, 'ana', ...limits, '--daily-tokens', '100000', '--monthly-tokens', '2000000', '--json'], admin);
    expect(create.code, create.stderr).toBe(0);
    const ana = JSON.parse(create.stdout);
    expect(ana).toMatchObject({
      rate_limits: { requests_per_minute: 60, burst_limit: 5, tokens_per_minute: 20000, max_concurrent_requests: 2 },
      budgets: { daily_tokens: 100000, monthly_tokens: 2000000, monthly_cost: null },
    });
    // Through the project's own route too (only --api-key): the limits given, the rest the creator's (none).
    const byKey = JSON.parse((await cli(['keys', 'create', project.id, 'bo', '--daily-tokens', '500', '--json'], root)).stdout);
    expect(byKey).toMatchObject({ rate_limits: { requests_per_minute: null }, budgets: { daily_tokens: 500, monthly_tokens: null } });

    const chat = await fetch(`${gateway.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ana.secret}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'count me' }] }),
    });
    expect(chat.status).toBe(200);
    const used = ((await chat.json()) as { usage: { total_tokens: number } }).usage.total_tokens;
    const shown = await cli(['keys', 'get', ana.id], root);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('  limits:     requests_per_minute=60, burst_limit=5, tokens_per_minute=20000, max_concurrent_requests=2\n');
    expect(shown.stdout).toContain('  budgets:    daily_tokens=100000, monthly_tokens=2000000\n');
    const json = JSON.parse((await cli(['keys', 'get', ana.id, '--json'], root)).stdout);
    expect(json.usage.used.daily_tokens).toBe(used);
    const lines = shown.stdout.trimEnd().split('\n');
    const heading = lines.findIndex((line) => line.startsWith('budgets in the current UTC periods'));
    expect(lines[heading]).toBe(`budgets in the current UTC periods (day ${json.usage.day}, month ${json.usage.month}):`);
    expect(lines[heading + 1]).toMatch(/^budget\s+limit\s+used\s+remaining$/);
    expect(lines.slice(heading + 3).map((line) => line.split(/\s+/))).toEqual([
      ['daily_tokens', '100000', String(used), String(100000 - used)],
      ['monthly_tokens', '2000000', String(used), String(2000000 - used)],
      ['monthly_cost', '-', '-', '-'],
    ]);

    // none removes a limit of the key's own (PATCH null); the fields not named stay.
    const updated = await cli(['keys', 'update', ana.id, '--daily-tokens', 'none', '--requests-per-minute', 'none', '--monthly-tokens', '3000000'], root);
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stdout).toContain('  limits:     burst_limit=5, tokens_per_minute=20000, max_concurrent_requests=2\n');
    expect(updated.stdout).toContain('  budgets:    monthly_tokens=3000000\n');
    const cleared = await cli(['keys', 'update', ana.id, '--burst-limit', 'none', '--tokens-per-minute', 'none', '--max-concurrent-requests', 'none', '--monthly-tokens', 'none'], root);
    expect(cleared.stdout).toContain('  limits:     none\n  budgets:    none\n');

    // The gateway's own bounds come back naming the field.
    const zero = await cli(['keys', 'update', ana.id, '--requests-per-minute', '0'], root);
    expect(zero.code).toBe(1);
    expect(zero.stderr).toContain('param: rate_limits.requests_per_minute');
  }, CLI_STEPS_TIMEOUT_MS);

  it('--priority on projects create / update and keys create / update; none clears it', async () => {
    const created = await cli(['projects', 'create', 'cli priority', '--priority', 'high', '--json'], admin);
    expect(created.code, created.stderr).toBe(0);
    const project = JSON.parse(created.stdout);
    expect(project.priority).toBe('high');
    const root = { NOVA_URL: gateway.url, NOVA_API_KEY: project.api_key.secret };
    const lowered = await cli(['projects', 'update', project.id, '--priority', 'low'], admin);
    expect(lowered.code, lowered.stderr).toBe(0);
    expect(lowered.stdout).toContain('  priority:    low\n');
    expect((await cli(['projects', 'update', project.id, '--priority', 'none'], admin)).stdout).toContain('  priority:    normal (default)\n');

    const key = JSON.parse((await cli(['keys', 'create', project.id, 'batch', '--priority', 'low', '--json'], admin)).stdout);
    expect(key.priority).toBe('low');
    const raised = await cli(['keys', 'update', key.id, '--priority', 'high'], root);
    expect(raised.code, raised.stderr).toBe(0);
    expect(raised.stdout).toContain('  priority:   high\n');
    const cleared = await cli(['keys', 'update', key.id, '--priority', 'none'], root);
    expect(cleared.stdout).toContain("  priority:   the project's\n");
    // A key without project:write may not raise a key: the gateway names the field.
    const worker = JSON.parse((await cli(['keys', 'create', project.id, 'worker', '--scope', 'keys:write', '--scope', 'keys:read', '--json'], root)).stdout);
    const refused = await cli(['keys', 'update', key.id, '--priority', 'high'], { NOVA_URL: gateway.url, NOVA_API_KEY: worker.secret });
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('param: priority');

    const port = await freePort();
    const nowhere = { NOVA_URL: `http://127.0.0.1:${port}`, NOVA_ADMIN_TOKEN: ADMIN_TOKEN, NOVA_API_KEY: 'nova_sk_x' };
    const bad = await Promise.all([
      cli(['keys', 'create', 'proj_x', 'k', '--priority', 'none'], nowhere),
      cli(['keys', 'update', 'key_x', '--priority', 'urgent'], nowhere),
      cli(['projects', 'update', 'proj_x'], nowhere),
    ]);
    expect(bad.map((run) => [run.code, run.stderr])).toEqual([
      [2, 'nova-gateway: --priority must be one of high, normal, low (got "none")\n'],
      [2, 'nova-gateway: --priority must be one of high, normal, low, none (got "urgent")\n'],
      [2, 'nova-gateway: projects update needs a change: --priority\n'],
    ]);
  }, CLI_STEPS_TIMEOUT_MS);

  it('refuses a bad limit value before any request, naming the flag (exit 2)', async () => {
    const port = await freePort();
    const nowhere = { NOVA_URL: `http://127.0.0.1:${port}`, NOVA_ADMIN_TOKEN: ADMIN_TOKEN, NOVA_API_KEY: 'nova_sk_x' };
    const cases: [string[], string][] = [
      [['keys', 'create', 'proj_x', 'k', '--daily-tokens', '1.5'], '--daily-tokens must be a whole number of 0 or more (got "1.5")'],
      [['keys', 'create', 'proj_x', 'k', '--requests-per-minute=-1'], '--requests-per-minute must be a whole number of 0 or more (got "-1")'],
      [['keys', 'create', 'proj_x', 'k', '--burst-limit', '1e3'], '--burst-limit must be a whole number of 0 or more (got "1e3")'],
      // none only clears, and a new key has nothing to clear.
      [['keys', 'create', 'proj_x', 'k', '--tokens-per-minute', 'none'], '--tokens-per-minute must be a whole number of 0 or more (got "none")'],
      [['keys', 'create', 'proj_x', 'k', '--monthly-cost=-2'], '--monthly-cost must be an amount of dollars of 0 or more (got "-2")'],
      [['keys', 'update', 'key_x', '--max-concurrent-requests', 'two'], '--max-concurrent-requests must be a whole number of 0 or more, or none to remove it (got "two")'],
      [['keys', 'update', 'key_x', '--monthly-tokens', ''], '--monthly-tokens must be a whole number of 0 or more, or none to remove it (got "")'],
      [['keys', 'update', 'key_x', '--monthly-cost', '12,5'], '--monthly-cost must be an amount of dollars of 0 or more, or none to remove it (got "12,5")'],
      [['webhooks', 'add', 'proj_x', 'https://alerts.example', '--threshold', '0'], '--threshold must be a fraction of the budget above 0, such as 0.8 (got "0")'],
      [['webhooks', 'add', 'proj_x', 'https://alerts.example', '--format', 'teams'], '--format must be one of standard, slack (got "teams")'],
      [['webhooks', 'deliveries', '--status', 'lost'], '--status must be one of pending, delivered, failed (got "lost")'],
      [['webhooks', 'deliveries', '--limit=-3'], '--limit must be a whole number of 0 or more (got "-3")'],
    ];
    const runs = await Promise.all(cases.map(([args]) => cli(args, nowhere)));
    runs.forEach((run, i) => expect(run, cases[i]![0].join(' ')).toEqual({ code: 2, stdout: '', stderr: `nova-gateway: ${cases[i]![1]}\n` }));
    // A value that starts with a dash, given apart, is refused by the parser, which names the flag too.
    const dashed = await cli(['keys', 'create', 'proj_x', 'k', '--daily-tokens', '-5'], nowhere);
    expect(dashed.code).toBe(2);
    expect(dashed.stderr).toContain("Option '--daily-tokens' argument is ambiguous");
  }, CLI_STEPS_TIMEOUT_MS);

  it('webhooks add / list / remove, and the delivery log', async () => {
    const project = JSON.parse((await cli(['projects', 'create', 'cli alerts', '--json'], admin)).stdout);
    const slack = await cli(['webhooks', 'add', project.id, 'https://hooks.slack.com/services/T0/B0/s3cretpath', '--format', 'slack', '--threshold', '0.8', '--threshold', '1'], admin);
    expect(slack.code, slack.stderr).toBe(0);
    expect(slack.stdout).toMatch(new RegExp(`^added webhook wh_\\w+ to ${project.id} \\(slack, thresholds 0.8, 1\\)\n$`));
    // Nothing listens here: deliveries to it stay pending with their error.
    const port = await freePort();
    const standard = await cli(['webhooks', 'add', project.id, `http://127.0.0.1:${port}/hook`, '--json'], admin);
    const hook = JSON.parse(standard.stdout);
    expect(hook).toMatchObject({ format: 'standard', thresholds: [0.5, 0.8, 1] });
    expect(hook.secret).toMatch(/^whsec_/);
    const human = await cli(['webhooks', 'add', project.id, `http://127.0.0.1:${port}/other`, '--threshold', '0.9,1'], admin);
    expect(human.stdout).toMatch(/\(standard, thresholds 0\.9, 1\)\nsecret: whsec_\S+\n {2}\(shown this once: store it now\)\n$/);

    const list = await cli(['webhooks', 'list', project.id], admin);
    expect(list.code, list.stderr).toBe(0);
    const [header, , ...rows] = list.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^id\s+format\s+url\s+thresholds\s+created_at$/);
    expect(rows).toHaveLength(3);
    expect(rows[0]).toMatch(/^wh_\w+\s+slack\s+https:\/\/hooks\.slack\.com\/…\s+0\.8, 1\s+\d{4}-/);
    expect(list.stdout).not.toContain('s3cretpath');
    expect(list.stdout).not.toContain(hook.secret);

    const other = rows[2]!.split(/\s+/)[0]!;
    const removed = await cli(['webhooks', 'remove', project.id, other], admin);
    expect(removed).toMatchObject({ code: 0, stdout: `removed webhook ${other} from ${project.id}\n` });
    expect((await cli(['webhooks', 'list', project.id], admin)).stdout).not.toContain(other);
    const again = await cli(['webhooks', 'remove', project.id, other], admin);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('(404 resource_not_found, param: webhook_id)');

    // A key expiring within a day makes an api_key.expiring event, one delivery per webhook of the project.
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    expect((await cli(['keys', 'create', project.id, 'short-lived', '--expires-at', expiresAt], admin)).code).toBe(0);
    let deliveries: { webhook_id: string; status: string; event_type: string }[] = [];
    // Polled over HTTP, not with a CLI process a time: the CLI reads the log once it is there.
    for (let i = 0; i < 100 && !deliveries.some((d) => d.webhook_id === hook.id && d.status === 'pending'); i++) {
      await sleep(100);
      const reply = await fetch(`${gateway.url}/admin/v1/webhook-deliveries?project_id=${project.id}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      deliveries = ((await reply.json()) as { data: typeof deliveries }).data;
    }
    const json = JSON.parse((await cli(['webhooks', 'deliveries', project.id, '--json'], admin)).stdout);
    expect(json.data.find((d: { webhook_id: string }) => d.webhook_id === hook.id)).toMatchObject({ event_type: 'api_key.expiring', project_id: project.id });
    expect(deliveries.find((d) => d.webhook_id === hook.id)).toMatchObject({ event_type: 'api_key.expiring', status: 'pending' });
    const table = await cli(['webhooks', 'deliveries', project.id, '--status', 'pending', '--limit', '10'], admin);
    expect(table.code, table.stderr).toBe(0);
    const lines = table.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^id\s+event_type\s+project_id\s+webhook_id\s+status\s+attempts\s+last_status\s+created_at\s+next_attempt_at\s+last_error$/);
    const row = lines.find((line) => line.includes(hook.id))!;
    expect(row).toMatch(new RegExp(`\\sapi_key\\.expiring\\s+${project.id}\\s+${hook.id}\\s+pending\\s+\\d+\\s`));
    const none = await cli(['webhooks', 'deliveries', project.id, '--status', 'delivered'], admin);
    expect(none.stdout.trimEnd().split('\n')).toHaveLength(2);
  }, CLI_STEPS_TIMEOUT_MS);

  it('lists the limit flags and the webhook commands in its usage text', async () => {
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    for (const flag of KEY_LIMIT_FLAGS) expect(help.stdout).toContain(`--${flag} `);
    expect(help.stdout).toContain('none: remove it');
    for (const command of ['webhooks list <project_id>', 'webhooks add <project_id> <webhook_url> [--format standard|slack] [--threshold F]...', 'webhooks remove', 'webhooks deliveries']) {
      expect(help.stdout).toContain(command);
    }
  });

  it('policy set changes the rate limits', async () => {
    const run = await cli(['policy', 'set', projectId, '--requests-per-minute', '120', '--burst-limit', '5'], {
      NOVA_URL: gateway.url,
      NOVA_API_KEY: secret,
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`rate limits of ${projectId}: 120/min, burst 5\n`);
    const none = await cli(['policy', 'set', projectId], { NOVA_URL: gateway.url, NOVA_API_KEY: secret });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--requests-per-minute');
  });

  it('usage prints a table of what the project consumed', async () => {
    for (let i = 0; i < 2; i++) {
      const response = await fetch(`${gateway.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'echo-1', messages: [{ role: 'user', content: 'count me' }] }),
      });
      expect(response.status).toBe(200);
    }
    await sleep(500); // usage.flush_interval_ms is 100
    const env = { NOVA_URL: gateway.url, NOVA_API_KEY: secret };
    const json = JSON.parse((await cli(['usage', projectId, '--json'], env)).stdout);
    expect(json.tokens.total).toBeGreaterThan(0);
    const run = await cli(['usage', projectId, '--bucket-width', '1h'], env);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(new RegExp(`^usage of ${projectId} from \\S+ to \\S+ \\(1h buckets; stored per minute\\)$`));
    expect(lines[1]).toMatch(/^start\s+requests\s+prompt tokens\s+completion tokens\s+total tokens\s+cached prompt\s+cache write\s+reasoning\s+images\s+audio s$/);
    const total = lines.find((line) => line.startsWith('total'))!.split(/\s+/);
    // The CLI's own usage read is admitted too, so it may count one more request than the JSON read did.
    expect(Number(total[1])).toBeGreaterThanOrEqual(json.requests);
    expect(Number(total[4])).toBe(json.tokens.total);
    expect(lines.filter((line) => /^\d{4}-/.test(line)).length).toBeGreaterThanOrEqual(1);
    expect(lines.at(-1)).toMatch(/^storage: \d+ bytes$/);
  });

  it('usage folds runs of empty buckets into one line and heads the table with their width', async () => {
    const env = { NOVA_URL: gateway.url, NOVA_API_KEY: secret };
    // A fixed day of minutes: the end is the next minute edge, which the gateway clips to no earlier edge.
    const endMs = Math.floor(Date.now() / 60_000) * 60_000 + 60_000;
    const window = ['--start-time', new Date(endMs - 24 * 3_600_000).toISOString(), '--end-time', new Date(endMs).toISOString()];
    const json = JSON.parse((await cli(['usage', projectId, ...window, '--bucket-width', '1m', '--json'], env)).stdout);
    expect(json.buckets.length).toBe(1440);
    const run = await cli(['usage', projectId, ...window, '--bucket-width', '1m'], env);
    expect(run.code).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`usage of ${projectId} from ${json.start_time} to ${json.end_time} (1m buckets; stored per minute)`);
    expect(lines.length).toBeLessThan(30); // was 1,446
    const folds = lines.map((line) => /^… ([\d,]+) empty 1m buckets from (\S+) to (\S+) …$/.exec(line)).filter((fold) => fold !== null);
    expect(folds[0]![2]).toBe(json.buckets[0].start_time);
    expect(Number(folds[0]![1]!.replace(/,/g, ''))).toBeGreaterThan(1000);
    expect(folds[0]![1]).toMatch(/^\d,\d{3}$/);
    // Every bucket is a row or inside a fold; an empty one is a row only alone, between two with usage.
    const rows = lines.filter((line) => /^\d{4}-/.test(line));
    const folded = folds.reduce((sum, fold) => sum + Number(fold[1]!.replace(/,/g, '')), 0);
    expect(rows.length + folded).toBe(json.buckets.length);
    expect(rows.length).toBeGreaterThanOrEqual(1);
    const empty = (line: string | undefined) => line !== undefined && /^\d{4}-\S+(\s+0)+$/.test(line);
    expect(lines.filter((line, i) => empty(line) && empty(lines[i + 1]))).toEqual([]);

    const days = await cli(['usage', projectId, '--bucket-width', '1d'], env);
    expect(days.stdout.split('\n')[0]).toMatch(/ \(1d buckets; stored per minute\)$/);
    const total = await cli(['usage', projectId], env);
    expect(total.stdout.split('\n')[0]).toMatch(/ \(total; stored per minute\)$/);
  });

  it('usage checks --bucket-width itself and names the widths the gateway accepts', async () => {
    expect(USAGE_BUCKET_WIDTHS).toEqual(Object.keys(BUCKET_WIDTHS));
    // Refused before any request: the gateway's own 400 said only "must be equal to constant".
    const port = await freePort();
    const run = await cli(['usage', 'proj_x', '--bucket-width', '2m'], { NOVA_URL: `http://127.0.0.1:${port}`, NOVA_API_KEY: 'nova_sk_x' });
    expect(run).toEqual({ code: 2, stdout: '', stderr: 'nova-gateway: --bucket-width must be one of 1m, 1h, 1d (got "2m")\n' });
    const env = { NOVA_URL: gateway.url, NOVA_API_KEY: secret };
    const accepted = await Promise.all(USAGE_BUCKET_WIDTHS.map((width) => cli(['usage', projectId, '--bucket-width', width, '--json'], env)));
    expect(accepted.map((each) => each.code)).toEqual([0, 0, 0]);
  });

  it('says plainly when the admin token is wrong, without echoing it', async () => {
    const run = await cli(['projects', 'create', 'x'], { NOVA_URL: gateway.url, NOVA_ADMIN_TOKEN: 'wrong-token-0123456789' });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe('nova-gateway: the gateway refused the admin token (401 invalid_api_key): check --admin-token / NOVA_ADMIN_TOKEN\n');
    expect(run.stdout).toBe('');
  });

  it('says plainly when the API key is wrong or missing', async () => {
    const wrong = await cli(['keys', 'list', projectId], { NOVA_URL: gateway.url, NOVA_API_KEY: 'nova_sk_not_a_real_key' });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(/^nova-gateway: the gateway refused the project's API key \(401 \w+\): check --api-key \/ NOVA_API_KEY\n$/);
    const missing = await cli(['keys', 'list', projectId], { NOVA_URL: gateway.url });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toBe("nova-gateway: this command needs the project's API key: pass --api-key or set NOVA_API_KEY\n");
  });

  it('says plainly when the gateway cannot be reached', async () => {
    const port = await freePort();
    const run = await cli(['projects', 'create', 'x'], { NOVA_URL: `http://127.0.0.1:${port}`, NOVA_ADMIN_TOKEN: ADMIN_TOKEN });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe(
      `nova-gateway: cannot reach the gateway at http://127.0.0.1:${port} (connection refused): check --url / NOVA_URL and that the gateway runs\n`,
    );
  });

  it('never prints the credentials of a --url / NOVA_URL', async () => {
    const port = await freePort();
    const userinfo = await cli(['--url', `http://alice:s3cret@127.0.0.1:${port}`, 'projects', 'list'], { NOVA_ADMIN_TOKEN: ADMIN_TOKEN });
    expect(userinfo).toEqual({
      code: 2,
      stdout: '',
      stderr: `nova-gateway: --url / NOVA_URL must not hold credentials (http://***@127.0.0.1:${port}/): pass the token with --admin-token / --api-key\n`,
    });
    // A user alone can be a token (https://TOKEN@host); a URL that does not parse is echoed redacted too.
    const token = await cli(['keys', 'list', 'proj_x'], { NOVA_URL: 'https://tok_0123456789@gateway.example', NOVA_API_KEY: 'k' });
    expect(token.code).toBe(2);
    expect(token.stderr).toContain('(https://***@gateway.example/)');
    const malformed = await cli(['projects', 'list'], { NOVA_URL: 'http://alice:s3cret@127.0.0.1:99999', NOVA_ADMIN_TOKEN: ADMIN_TOKEN });
    expect(malformed.code).toBe(2);
    expect(malformed.stderr).toBe('nova-gateway: --url / NOVA_URL is not a URL: http://***@127.0.0.1:99999\n');
    // A query would swallow the request path; its secret-looking values are not echoed either.
    const query = await cli(['projects', 'list'], { NOVA_URL: `http://127.0.0.1:${port}/?access_token=t0k3n&region=eu`, NOVA_ADMIN_TOKEN: ADMIN_TOKEN });
    expect(query.code).toBe(2);
    expect(query.stderr).toBe(`nova-gateway: --url / NOVA_URL must not have a query or fragment: http://127.0.0.1:${port}/?access_token=***&region=eu\n`);
    for (const run of [userinfo, token, malformed, query]) {
      expect(run.stdout + run.stderr).not.toMatch(/alice|s3cret|tok_0123456789|t0k3n/);
    }
  });

  it('refuses unknown commands and flags with the usage text (exit 2)', async () => {
    const unknown = await cli(['projects', 'explode'], admin);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^nova-gateway: unknown command: projects explode\n\nnova-gateway: manage projects/);
    const flag = await cli(['projects', 'list', '--colour'], admin);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--colour'");
  });

  it('projects list pages newest first, get shows the policy and keys, delete asks for --yes then deletes', async () => {
    const older = await gateway.createProject({ name: 'cli older', environment: 'staging', requests_per_minute: 120, burst_limit: 4 });
    await sleep(5);
    const newer = await gateway.createProject({ name: 'cli newer' });
    const first = await cli(['projects', 'list', '--limit', '2'], admin);
    expect(first.code).toBe(0);
    const lines = first.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+environment\s+created_at\s+rpm\s+burst\s+keys$/);
    expect(lines[2]).toMatch(new RegExp(`^${newer.projectId}\\s+cli newer\\s+-\\s+`));
    expect(lines[3]).toMatch(new RegExp(`^${older.projectId}\\s+cli older\\s+staging\\s+\\S+\\s+120\\s+4\\s+`));
    const cursor = /^more: --cursor (\S+)$/.exec(lines.at(-1)!)![1]!;
    const second = await cli(['projects', 'list', '--limit', '2', '--cursor', cursor], admin);
    expect(second.code).toBe(0);
    expect(second.stdout).not.toContain(newer.projectId);
    expect(second.stdout).not.toContain(older.projectId);

    const shown = await cli(['projects', 'get', older.projectId], admin);
    expect(shown.stdout).toContain(`project ${older.projectId}`);
    expect(shown.stdout).toMatch(/rate limits: 120\/min, burst 4/);
    expect(shown.stdout).toMatch(/keys:\s+1/);

    const unconfirmed = await cli(['projects', 'delete', older.projectId], admin);
    expect(unconfirmed.code).toBe(2);
    expect((await cli(['projects', 'get', older.projectId], admin)).code).toBe(0);
    const deleted = await cli(['projects', 'delete', older.projectId, '--yes'], admin);
    expect(deleted).toMatchObject({ code: 0, stdout: `deleted project ${older.projectId}\n` });
    const missing = await cli(['projects', 'get', older.projectId], admin);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('nova-gateway: No such project. (404 resource_not_found, param: project_id)\n');
  });
});
