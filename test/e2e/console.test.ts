import OpenAI from 'openai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { checkPageAtBothWidths, launchChromium, openPage, screenshot } from '../support/browser.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { LoopbackUpstream } from '../support/loopback-upstream.js';
import type { UsageAnswer } from '../support/usage-answer.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const TWELVE_HOURS = 12 * 3600;
/** A browser test walks many pages, and axe takes seconds a page: more than vitest's 30 s default. */
const SLOW = 180_000;

/**
 * The web console (docs/console.md) in Debian's chromium, against the real gateway process, a real
 * Redis and real model traffic: sign-in and its cookie, keys shown once and revoked, the usage chart
 * against the usage API, CSRF, a key's narrower view, axe at two widths, throttling and expiry.
 */
describe('web console in a real browser', { timeout: SLOW }, () => {
  let upstream: LoopbackUpstream;
  let gateway: GatewayProcess;
  let browser: Browser;
  const cspViolations: string[] = [];
  const contexts: BrowserContext[] = [];
  let admin: Page;
  let projectId: string;
  let projectName: string;
  let defaultSecret: string;
  let otherProjectId: string;

  const open = async () => {
    const opened = await openPage(browser, cspViolations);
    contexts.push(opened.context);
    return opened.page;
  };

  const signIn = async (page: Page, base: string, token: string) => {
    await page.goto(`${base}/console/`);
    await page.getByLabel('Admin token or project API key').fill(token);
    await page.getByRole('button', { name: 'Sign in' }).click();
  };

  const adminApi = async <T>(path: string): Promise<T> => {
    const response = await fetch(`${gateway.url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(response.status, await response.clone().text()).toBe(200);
    return (await response.json()) as T;
  };

  beforeAll(async () => {
    // The gateway under test serves dist/console, which the global setup built when missing or stale.
    upstream = await LoopbackUpstream.start();
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
      configYaml: `
models:
  - id: chat-a
    upstream: ${upstream.baseUrl()}
    pricing: { input_per_million: 2.5, output_per_million: 10 }
  - id: chat-b
    upstream: ${upstream.baseUrl()}
    pricing: { input_per_million: 0.15, output_per_million: 0.6 }
redis:
  key_prefix: e2econsole${randomBase62(8)}
usage:
  flush_interval_ms: 200
`,
    });
    otherProjectId = (await gateway.createProject({ name: 'someone else' })).projectId;
    browser = await launchChromium();
    admin = await open();
  }, 120_000);

  afterAll(async () => {
    for (const context of contexts) await context.close().catch(() => undefined);
    await browser?.close();
    await gateway?.stop();
    await upstream?.close();
  });

  it('refuses a wrong token with the server message', async () => {
    await signIn(admin, gateway.url, 'not-the-admin-token');
    const alert = admin.getByRole('alert');
    await expect.poll(() => alert.textContent()).toContain('The token is neither the admin token nor a valid API key.');
    await screenshot(admin, 'sign-in-wrong-token');
  });

  it('signs the admin in with an HttpOnly, SameSite=Strict, 12 h cookie and stores no token in the browser', async () => {
    const answer = admin.waitForResponse((response) => response.url().endsWith('/console/session') && response.request().method() === 'POST');
    await admin.getByLabel('Admin token or project API key').fill(ADMIN_TOKEN);
    await admin.getByRole('button', { name: 'Sign in' }).click();
    const setCookie = (await (await answer).headerValue('set-cookie')) ?? '';
    await admin.getByRole('heading', { name: 'Overview' }).waitFor();

    expect(setCookie).toMatch(/^nova_session=/);
    expect(setCookie).toMatch(/;\s*HttpOnly/i);
    expect(setCookie).toMatch(/;\s*SameSite=Strict/i);
    // 12 h from sign-in (the server counts whole seconds left, so a millisecond later it may say 43199).
    const maxAge = Number(/Max-Age=(\d+)/i.exec(setCookie)?.[1]);
    expect(maxAge).toBeGreaterThan(TWELVE_HOURS - 60);
    expect(maxAge).toBeLessThanOrEqual(TWELVE_HOURS);
    // Plain http here: Secure only behind TLS (a Secure cookie would not come back over http).
    expect(setCookie).not.toMatch(/;\s*Secure/i);
    const cookies = await admin.context().cookies();
    const session = cookies.find((cookie) => cookie.name === 'nova_session')!;
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', secure: false, path: '/' });
    expect(Math.abs(session.expires - (Date.now() / 1000 + TWELVE_HOURS))).toBeLessThan(120);

    const stored = await admin.evaluate(() => ({
      local: JSON.stringify({ ...localStorage }),
      session: JSON.stringify({ ...sessionStorage }),
      cookie: document.cookie,
    }));
    for (const place of [stored.local, stored.session, stored.cookie, ...cookies.map((cookie) => cookie.value)]) expect(place).not.toContain(ADMIN_TOKEN);
    expect(stored.cookie).toBe(''); // HttpOnly: the page cannot read its session
  });

  it('creates a project and a key whose secret is shown once, works, and is gone after a reload', async () => {
    projectName = `console ${randomBase62(6)}`;
    await admin.goto(`${gateway.url}/console/#/projects`);
    await admin.getByLabel('Name', { exact: true }).fill(projectName);
    await admin.getByLabel('Environment (optional)').fill('staging');
    await admin.getByRole('button', { name: 'Create project' }).click();
    defaultSecret = await admin.getByLabel('Secret', { exact: true }).inputValue();
    expect(defaultSecret).toMatch(/^nova_sk_/);
    await admin.getByRole('button', { name: 'I have stored it' }).click();
    const row = admin.getByRole('row').filter({ hasText: projectName });
    projectId = (await row.locator('td.mono').textContent())!;
    expect(projectId).toMatch(/^proj_/);

    await admin.goto(`${gateway.url}/console/#/projects/${projectId}/keys`);
    await admin.getByLabel('Name', { exact: true }).fill('ci key');
    await admin.getByRole('button', { name: 'Create key' }).click();
    const secret = await admin.getByLabel('Secret', { exact: true }).inputValue();
    expect(secret).toMatch(/^nova_sk_/);
    await screenshot(admin, 'key-secret-shown-once');

    const client = new OpenAI({ apiKey: secret, baseURL: `${gateway.url}/v1` });
    const completion = await client.chat.completions.create({ model: 'chat-a', messages: [{ role: 'user', content: 'hello' }] });
    expect(completion.choices[0]?.message.content).toBeTruthy();

    await admin.reload();
    await admin.getByRole('row').filter({ hasText: 'ci key' }).waitFor();
    expect(await admin.getByLabel('Secret', { exact: true }).count()).toBe(0);
    expect(await admin.content()).not.toContain(secret);
    (globalThis as { ciKeySecret?: string }).ciKeySecret = secret;
  });

  it('charts and tabulates the same request count as the usage API for the same window', async () => {
    const secret = (globalThis as { ciKeySecret?: string }).ciKeySecret!;
    const client = new OpenAI({ apiKey: secret, baseURL: `${gateway.url}/v1` });
    for (const model of ['chat-a', 'chat-a', 'chat-b', 'chat-b', 'chat-b']) {
      await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'count me' }] });
    }
    await new OpenAI({ apiKey: defaultSecret, baseURL: `${gateway.url}/v1` }).chat.completions.create({ model: 'chat-a', messages: [{ role: 'user', content: 'me too' }] });

    await admin.goto(`${gateway.url}/console/#/projects/${projectId}/usage`);
    await admin.getByLabel('Window').selectOption('1h');
    const figure = admin.locator('figure.chart');
    // 7 calls: the page's own window may read before the last flush (usage.flush_interval_ms), so refresh until they show.
    const deadline = Date.now() + 10_000;
    while (Number(await figure.getAttribute('data-plotted-total').catch(() => '0')) < 7 && Date.now() < deadline) {
      await sleep(300);
      await admin.getByRole('button', { name: 'Refresh' }).click();
    }
    const usage = admin.locator('section.usage');
    const [start, end] = [await usage.getAttribute('data-start-time'), await usage.getAttribute('data-end-time')];
    const plotted = Number(await figure.getAttribute('data-plotted-total'));
    const tabulated = Number(await admin.locator('table.usage-table').getAttribute('data-total-requests'));
    const answer = await adminApi<UsageAnswer>(`/admin/v1/projects/${projectId}/usage?start_time=${start}&end_time=${end}&bucket_width=1m&group_by=model`);
    expect(plotted).toBeGreaterThanOrEqual(7);
    expect(plotted).toBe(answer.requests);
    expect(tabulated).toBe(answer.requests);
    // The table's per-model rows are the API's groups.
    const chatB = admin.getByRole('row').filter({ hasText: 'chat-b' });
    await expect.poll(() => chatB.locator('td').first().textContent()).toBe('3');
    await expect.poll(() => admin.locator('figcaption').textContent()).toContain(`Requests: ${answer.requests} in total`);
    await screenshot(admin, 'project-usage-1h');

    await admin.getByLabel('Stacked by').selectOption('api_key');
    await expect.poll(() => admin.locator('table.usage-table caption').textContent()).toBe('Usage by api key');
  });

  it('refuses a state-changing call made with the cookie but without the CSRF header', async () => {
    const refused = await admin.evaluate(async () => {
      const response = await fetch('/admin/v1/projects', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'forged' }),
      });
      return { status: response.status, body: (await response.json()) as { error?: { code?: string } } };
    });
    expect(refused.status).toBe(403);
    expect(refused.body.error?.code).toBe('csrf_token_invalid');
  });

  it("sets a project's policy as the admin", async () => {
    await admin.goto(`${gateway.url}/console/#/projects/${projectId}/settings`);
    // The policy's fields; the ceilings' fieldset below has fields of the same names.
    const policy = admin.getByRole('group', { name: /Rate limits and budgets/ });
    await policy.getByLabel('Requests per minute').fill('1234');
    await policy.getByLabel('Monthly cost in USD (budget)').fill('12.5');
    await admin.getByRole('button', { name: 'Save settings' }).click();
    await admin.getByText('Saved.').waitFor();
    const project = await adminApi<{ rate_limits: { requests_per_minute: number; monthly_cost: number | null } }>(`/admin/v1/projects/${projectId}`);
    expect(project.rate_limits).toMatchObject({ requests_per_minute: 1234, monthly_cost: 12.5 });
  });

  it('rotates a key with a grace period: the new secret is shown once and both work until the grace ends', async () => {
    await admin.goto(`${gateway.url}/console/#/projects/${projectId}/keys`);
    await admin.getByRole('button', { name: 'Rotate key default' }).click();
    await admin.getByLabel(/Grace period in seconds/).fill('600');
    await admin.getByRole('dialog').getByRole('button', { name: 'Rotate key' }).click();
    const rotated = await admin.getByLabel('Secret', { exact: true }).inputValue();
    expect(rotated).toMatch(/^nova_sk_/);
    expect(rotated).not.toBe(defaultSecret);
    await admin.getByText(/Key “default” rotated: its old secret works until/).waitFor();
    for (const secret of [rotated, defaultSecret]) {
      expect((await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${secret}` } })).status).toBe(200);
    }
  });

  it('revokes the key in the UI, after which it gets 401 within 2 s', async () => {
    const secret = (globalThis as { ciKeySecret?: string }).ciKeySecret!;
    // A fresh page: the rotation before left its secret panel and focus on this same address.
    await admin.goto(`${gateway.url}/console/#/projects/${projectId}/keys`);
    await admin.reload();
    await admin.getByRole('button', { name: 'Revoke key ci key' }).click();
    await admin.getByRole('dialog').getByRole('button', { name: 'Revoke key' }).click();
    const revokedAt = Date.now();
    await admin.getByText('Key “ci key” revoked').waitFor();
    let status = 0;
    while (Date.now() - revokedAt < 5_000) {
      status = (await fetch(`${gateway.url}/v1/models`, { headers: { authorization: `Bearer ${secret}` } })).status;
      if (status === 401) break;
      await sleep(50);
    }
    expect(status).toBe(401);
    expect(Date.now() - revokedAt).toBeLessThan(2_000);
    // The list reloads after the notice shows; wait for the row to go (it fails at the timeout if it stays).
    await admin.getByRole('row').filter({ hasText: 'ci key' }).waitFor({ state: 'detached', timeout: 10_000 });
    expect(await admin.getByRole('row').filter({ hasText: 'ci key' }).count()).toBe(0);
  });

  it('shows a project key its own project only', async () => {
    const page = await open();
    await signIn(page, gateway.url, defaultSecret);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    const nav = page.getByRole('navigation', { name: 'Main' });
    expect(await nav.getByRole('link', { name: 'Projects' }).count()).toBe(0);
    await nav.getByRole('link', { name: 'My project' }).click();
    await page.getByRole('heading', { name: `Project “${projectName}”` }).waitFor();

    await page.goto(`${gateway.url}/console/#/projects`);
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('Only operators');
    expect(await page.content()).not.toContain('someone else');
    await page.goto(`${gateway.url}/console/#/projects/${otherProjectId}/settings`);
    await expect.poll(() => page.getByRole('alert').textContent()).toContain(`cannot see project ${otherProjectId}`);
    // The API agrees: the key's session cannot read the other project.
    const status = await page.evaluate(async (id) => (await fetch(`/v1/projects/${id}`, { credentials: 'same-origin' })).status, otherProjectId);
    expect(status).toBe(403);
    await screenshot(page, 'key-other-project-refused');

    const problems: string[] = [];
    for (const [name, hash] of [
      ['key-overview', '#/'],
      ['key-project-settings', `#/projects/${projectId}/settings`],
      ['key-project-keys', `#/projects/${projectId}/keys`],
      ['key-project-usage', `#/projects/${projectId}/usage`],
      ['key-project-webhooks', `#/projects/${projectId}/webhooks`],
    ] as const) {
      await page.goto(`${gateway.url}/console/${hash}`);
      await page.getByRole('main').locator('h1').waitFor();
      await page.waitForLoadState('networkidle');
      problems.push(...(await checkPageAtBothWidths(page, name)));
    }
    expect(await page.getByText('sign in with the admin token to see them').count()).toBe(1);
    expect(problems).toEqual([]);
  });

  it("shows a key only what its scopes allow", async () => {
    const response = await fetch(`${gateway.url}/admin/v1/projects/${projectId}/api-keys`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'reader', scopes: ['usage:read'] }),
    });
    expect(response.status).toBe(200);
    const { secret } = (await response.json()) as { secret: string };
    const page = await open();
    await signIn(page, gateway.url, secret);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.locator('figure.chart').waitFor();
    await page.goto(`${gateway.url}/console/#/projects/${projectId}/keys`);
    await page.getByText("This key has no keys:read scope, so it cannot list the project's keys.").waitFor();
    await page.goto(`${gateway.url}/console/#/projects/${projectId}/settings`);
    await page.getByText('This key has no project:write scope: the settings are read-only.').waitFor();
    expect(await page.getByRole('button', { name: 'Save settings' }).count()).toBe(0);
  });

  it('passes axe (no serious or critical violation) on every page at 1280 and 390 px, with a screenshot of each', async () => {
    const problems: string[] = [];
    const signInPage = await open();
    await signInPage.goto(`${gateway.url}/console/`);
    await signInPage.getByLabel('Admin token or project API key').waitFor();
    problems.push(...(await checkPageAtBothWidths(signInPage, 'sign-in')));

    for (const [name, hash] of [
      ['overview', '#/'],
      ['projects', '#/projects'],
      ['project-settings', `#/projects/${projectId}/settings`],
      ['project-keys', `#/projects/${projectId}/keys`],
      ['project-usage', `#/projects/${projectId}/usage`],
      ['project-webhooks', `#/projects/${projectId}/webhooks`],
    ] as const) {
      await admin.goto(`${gateway.url}/console/${hash}`);
      await admin.getByRole('main').locator('h1').waitFor();
      await admin.waitForLoadState('networkidle');
      expect(await admin.getByRole('alert').count(), `${name} shows an error`).toBe(0);
      problems.push(...(await checkPageAtBothWidths(admin, name)));
    }
    // The delete confirmation, a dialog over the projects page.
    await admin.goto(`${gateway.url}/console/#/projects`);
    await admin.getByRole('button', { name: `Delete project ${projectName}` }).click();
    await admin.getByRole('dialog').waitFor();
    problems.push(...(await checkPageAtBothWidths(admin, 'projects-delete-dialog')));
    await admin.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect(problems).toEqual([]);
  });

  it('deletes a project after confirmation', async () => {
    const name = `short-lived ${randomBase62(4)}`;
    await admin.goto(`${gateway.url}/console/#/projects`);
    await admin.getByLabel('Name', { exact: true }).fill(name);
    await admin.getByRole('button', { name: 'Create project' }).click();
    await admin.getByRole('button', { name: 'I have stored it' }).click();
    await admin.getByLabel('Search by name or id').fill(name);
    expect(await admin.getByRole('row').count()).toBe(2); // header and the one match
    await admin.getByRole('button', { name: `Delete project ${name}` }).click();
    await admin.getByRole('dialog').getByRole('button', { name: 'Delete project' }).click();
    await expect.poll(() => admin.getByText(`No project matches “${name}”.`).count()).toBe(1);
  });

  it('reports no Content-Security-Policy violation on any page, under a policy with no inline script or style', async () => {
    // Without the header there would be nothing to violate: the pages were checked under it.
    const policy = (await fetch(`${gateway.url}/console/`)).headers.get('content-security-policy') ?? '';
    expect(policy).toContain("script-src 'self'");
    expect(policy).toContain("style-src 'self'");
    expect(policy).not.toContain('unsafe-inline');
    expect(cspViolations).toEqual([]);
  });

  describe('with a short session and a small failed-attempt allowance', () => {
    let short: GatewayProcess;

    beforeAll(async () => {
      short = await GatewayProcess.start({
        env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
        configYaml: `
models:
  - id: echo-1
    provider: echo
console:
  session_ttl_seconds: 3
auth:
  failed_attempts:
    max: 3
    window_seconds: 60
    block_seconds: 60
redis:
  key_prefix: e2econsoleshort${randomBase62(8)}
`,
      });
    }, 60_000);

    afterAll(async () => {
      await short?.stop();
    });

    it('returns an expired session to sign-in, keeping nothing', async () => {
      const name = `expiring ${randomBase62(6)}`;
      await short.createProject({ name });
      const page = await open();
      await signIn(page, short.url, ADMIN_TOKEN);
      await page.getByRole('link', { name: 'Projects', exact: true }).click();
      await page.getByRole('link', { name }).waitFor();
      await sleep(3_500);
      // The next API call answers 401: the console drops everything and asks to sign in again.
      await page.getByRole('link', { name: 'Overview', exact: true }).click();
      await page.getByText('Your session has ended. Sign in again.').waitFor();
      await page.getByLabel('Admin token or project API key').waitFor();
      expect(await page.content()).not.toContain(name);
      expect(await page.getByRole('navigation', { name: 'Main' }).count()).toBe(0);
      expect(await page.evaluate(() => localStorage.length + sessionStorage.length)).toBe(0);
      await screenshot(page, 'sign-in-after-expiry');
    });

    it('throttles repeated wrong tokens with 429 and says so', async () => {
      const page = await open();
      await page.goto(`${short.url}/console/`);
      const statuses: number[] = [];
      page.on('response', (response) => {
        if (response.url().endsWith('/console/session') && response.request().method() === 'POST') statuses.push(response.status());
      });
      for (let attempt = 0; attempt < 5 && !statuses.includes(429); attempt++) {
        await page.getByLabel('Admin token or project API key').fill(`nova_sk_wrong${attempt}${randomBase62(30)}`);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await expect.poll(() => statuses.length).toBe(attempt + 1);
      }
      expect(statuses[0]).toBe(401);
      expect(statuses).toContain(429);
      await expect.poll(() => page.getByRole('alert').textContent()).toContain('Too many failed attempts');
      await screenshot(page, 'sign-in-throttled');
    });
  });
});
