import { spawn } from 'node:child_process';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { GatewayProcess } from '../support/gateway-process.js';
import { freePort } from '../support/redis-server.js';
import { ADMIN_TOKEN } from '../support/test-app.js';

const ROOT = new URL('../../', import.meta.url).pathname;

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
      configYaml: `models:\n  - id: echo-1\n    provider: echo\nredis:\n  key_prefix: cli-${Date.now()}\nusage:\n  flush_interval_ms: 100\n`,
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
    expect(lines[0]).toMatch(new RegExp(`^usage of ${projectId} from \\S+ to \\S+ \\(minute buckets\\)$`));
    expect(lines[1]).toMatch(/^start\s+requests\s+prompt tokens\s+completion tokens\s+total tokens\s+images\s+audio s$/);
    const total = lines.find((line) => line.startsWith('total'))!.split(/\s+/);
    // The CLI's own usage read is admitted too, so it may count one more request than the JSON read did.
    expect(Number(total[1])).toBeGreaterThanOrEqual(json.requests);
    expect(Number(total[4])).toBe(json.tokens.total);
    expect(lines.filter((line) => /^\d{4}-/.test(line)).length).toBeGreaterThanOrEqual(1);
    expect(lines.at(-1)).toMatch(/^storage: \d+ bytes$/);
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

  it('refuses unknown commands and flags with the usage text (exit 2)', async () => {
    const unknown = await cli(['projects', 'explode'], admin);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^nova-gateway: unknown command: projects explode\n\nnova-gateway: manage projects/);
    const flag = await cli(['projects', 'list', '--colour'], admin);
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain("Unknown option '--colour'");
  });
});

/**
 * projects list / get / delete speak the admin contract of DESIGN.md section 5; the gateway gains
 * those routes separately, so here they run against an HTTP server that answers that contract.
 */
describe('nova-gateway CLI: project lifecycle commands (admin contract)', () => {
  let server: Server;
  let url: string;
  const seen: { method: string; url: string; authorization: string | undefined }[] = [];
  const project = (n: number) => ({
    id: `proj_${n}`,
    object: 'nova.resource',
    status: 'succeeded',
    name: `project ${n}`,
    environment: n === 1 ? 'production' : null,
    created_at: '2026-11-23T10:00:00.000Z',
    updated_at: '2026-11-23T10:00:00.000Z',
    rate_limits: { requests_per_minute: 60 * n, burst_limit: n },
    key_count: n,
  });

  beforeAll(async () => {
    server = createServer((request: IncomingMessage, response) => {
      seen.push({ method: request.method!, url: request.url!, authorization: request.headers.authorization });
      const send = (status: number, body: unknown) => response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      const path = request.url!.split('?')[0]!;
      if (request.method === 'GET' && path === '/admin/v1/projects') {
        const cursor = new URL(request.url!, 'http://x').searchParams.get('cursor');
        return cursor === 'page2'
          ? send(200, { data: [project(3)], has_more: false, next_cursor: null })
          : send(200, { data: [project(1), project(2)], has_more: true, next_cursor: 'page2' });
      }
      if (request.method === 'GET' && path === '/admin/v1/projects/proj_1') return send(200, project(1));
      if (request.method === 'DELETE' && path === '/admin/v1/projects/proj_2') return send(200, { id: 'proj_2', object: 'nova.resource', status: 'succeeded' });
      send(404, { error: { message: 'No such project.', type: 'not_found_error', code: 'resource_not_found', param: 'project_id' } });
    });
    const port = await freePort();
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('projects list pages with --limit and --cursor and prints a table', async () => {
    const env = { NOVA_URL: url, NOVA_ADMIN_TOKEN: ADMIN_TOKEN };
    const first = await cli(['projects', 'list', '--limit', '2'], env);
    expect(first.code).toBe(0);
    const lines = first.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^id\s+name\s+environment\s+created_at\s+rpm\s+burst\s+keys$/);
    expect(lines[2]).toMatch(/^proj_1\s+project 1\s+production\s+2026-11-23T10:00:00.000Z\s+60\s+1\s+1$/);
    expect(lines[3]).toMatch(/^proj_2\s+project 2\s+-\s+/);
    expect(lines[4]).toBe('more: --cursor page2');
    const second = await cli(['projects', 'list', '--cursor', 'page2'], env);
    expect(second.stdout).toMatch(/proj_3/);
    expect(second.stdout).not.toMatch(/more:/);
    expect(seen.slice(-2).map((request) => request.url)).toEqual(['/admin/v1/projects?limit=2', '/admin/v1/projects?cursor=page2']);
    expect(seen.at(-1)!.authorization).toBe(`Bearer ${ADMIN_TOKEN}`);
  });

  it('projects get prints the project; an unknown one is the gateway message', async () => {
    const env = { NOVA_URL: url, NOVA_ADMIN_TOKEN: ADMIN_TOKEN };
    const run = await cli(['projects', 'get', 'proj_1'], env);
    expect(run.stdout).toBe(
      'project proj_1\n  name:        project 1\n  environment: production\n  created_at:  2026-11-23T10:00:00.000Z\n  rate limits: 60/min, burst 1\n  keys:        1\n',
    );
    const missing = await cli(['projects', 'get', 'proj_9'], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe('nova-gateway: No such project. (404 resource_not_found, param: project_id)\n');
  });

  it('projects delete asks for --yes, then deletes', async () => {
    const env = { NOVA_URL: url, NOVA_ADMIN_TOKEN: ADMIN_TOKEN };
    const before = seen.length;
    const unconfirmed = await cli(['projects', 'delete', 'proj_2'], env);
    expect(unconfirmed.code).toBe(2);
    expect(seen.length).toBe(before);
    const run = await cli(['projects', 'delete', 'proj_2', '--yes'], env);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('deleted project proj_2\n');
    expect(seen.at(-1)).toMatchObject({ method: 'DELETE', url: '/admin/v1/projects/proj_2' });
  });
});
