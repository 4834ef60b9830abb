import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { generateSecret } from '../../src/auth/key-format.js';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { RawConnection, responsesIn } from '../support/raw-http.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const HEADERS_TIMEOUT_MS = 600;
const BODY_TIMEOUT_MS = 1200;
const KEEP_ALIVE_TIMEOUT_MS = 800;
const MAX_CONNECTIONS_PER_ADDRESS = 20;
// A deadline is noticed at most a tenth of the shortest timeout late; the rest is scheduling slack.
const SLACK_MS = 1000;

/**
 * The real process and real sockets: client deadlines (headers, body, idle keep-alive), the
 * cap on connections per address, HTTP/1.0 with chunked encoding, and the header checks.
 */
describe('client connections against the real process', () => {
  let gateway: GatewayProcess;
  let project: TestProject;

  beforeAll(async () => {
    gateway = await GatewayProcess.start({
      env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
      configYaml: `
models:
  - id: echo-1
    provider: echo
server:
  headers_timeout_ms: ${HEADERS_TIMEOUT_MS}
  body_timeout_ms: ${BODY_TIMEOUT_MS}
  keep_alive_timeout_ms: ${KEEP_ALIVE_TIMEOUT_MS}
  max_connections_per_address: ${MAX_CONNECTIONS_PER_ADDRESS}
redis:
  key_prefix: e2e${randomBase62(8)}
`,
    });
    project = await gateway.createProject({ name: 'connections' });
  });

  afterAll(async () => {
    await gateway?.stop();
  });

  // With a valid key: without one the 401 comes on the headers and the body is never waited for.
  const slowBody = () =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: ${project.auth.authorization}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`;

  it('answers a body that stops arriving with 408 request_timeout and closes the connection', async () => {
    const connection = await RawConnection.open(gateway.port);
    connection.write(slowBody());
    const outcome = await connection.outcome(BODY_TIMEOUT_MS + SLACK_MS + 2000);

    expect(outcome.closedByServer).toBe(true);
    expect(outcome.closedAfterMs).toBeGreaterThanOrEqual(BODY_TIMEOUT_MS - 50);
    expect(outcome.closedAfterMs).toBeLessThan(BODY_TIMEOUT_MS + SLACK_MS);
    expect(responsesIn(outcome.data)).toEqual([
      {
        status: 408,
        body: { error: { type: 'invalid_request_error', code: 'request_timeout', message: expect.any(String) } },
      },
    ]);
    expect(outcome.data.toLowerCase()).toContain('connection: close');
  });

  it('answers headers that stop arriving with 408 after the headers timeout', async () => {
    const connection = await RawConnection.open(gateway.port);
    connection.write('GET /v1/models HTTP/1.1\r\nHost: gw\r\nX-Slow: ');
    const outcome = await connection.outcome(HEADERS_TIMEOUT_MS + SLACK_MS + 2000);

    expect(outcome.closedByServer).toBe(true);
    expect(outcome.closedAfterMs).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(outcome.closedAfterMs).toBeLessThan(HEADERS_TIMEOUT_MS + SLACK_MS);
    expect(responsesIn(outcome.data).map((response) => response.status)).toEqual([408]);
  });

  it('closes an idle keep-alive connection after the keep-alive timeout', async () => {
    const connection = await RawConnection.open(gateway.port);
    connection.write('GET /livez HTTP/1.1\r\nHost: gw\r\n\r\n');
    const outcome = await connection.outcome(KEEP_ALIVE_TIMEOUT_MS + SLACK_MS + 2000);

    expect(responsesIn(outcome.data).map((response) => response.status)).toEqual([200]);
    expect(outcome.closedByServer).toBe(true);
    // Node holds the socket 1 s past the advertised timeout, so a client reusing it at the last moment is not reset.
    const idleMs = outcome.closedAfterMs - outcome.firstByteAfterMs!;
    expect(idleMs).toBeGreaterThanOrEqual(KEEP_ALIVE_TIMEOUT_MS - 50);
    expect(idleMs).toBeLessThan(KEEP_ALIVE_TIMEOUT_MS + 1000 + SLACK_MS);
  });

  it('keeps answering /readyz while one address holds many stalled bodies; beyond its cap they are closed at once', async () => {
    // The stalled sockets come from another loopback address, so the cap is theirs alone.
    const stalled = await Promise.all(
      Array.from({ length: MAX_CONNECTIONS_PER_ADDRESS * 3 }, async () => {
        const connection = await RawConnection.open(gateway.port, { localAddress: '127.0.0.2' });
        connection.write(slowBody());
        return connection;
      }),
    );
    const outcomes = Promise.all(stalled.map((connection) => connection.outcome(BODY_TIMEOUT_MS + SLACK_MS + 3000)));

    const startedAt = Date.now();
    const ready = await fetch(`${gateway.url}/readyz`, { signal: AbortSignal.timeout(5000) });
    expect(ready.status).toBe(200);
    expect(Date.now() - startedAt).toBeLessThan(1000);

    const results = await outcomes;
    const timedOut = results.filter((outcome) => responsesIn(outcome.data)[0]?.status === 408);
    const refused = results.filter((outcome) => outcome.data === '');
    expect(timedOut).toHaveLength(MAX_CONNECTIONS_PER_ADDRESS);
    expect(refused).toHaveLength(MAX_CONNECTIONS_PER_ADDRESS * 2);
    for (const outcome of refused) expect(outcome.closedAfterMs).toBeLessThan(BODY_TIMEOUT_MS);
    for (const outcome of results) expect(outcome.closedByServer).toBe(true);

    // The address's connections are counted down again as they close.
    const after = await RawConnection.open(gateway.port, { localAddress: '127.0.0.2' });
    after.write('GET /livez HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
    expect(responsesIn((await after.outcome(3000)).data).map((response) => response.status)).toEqual([200]);
  });

  it('answers only the first of two requests sent in one write after an HTTP/1.0 chunked message, then closes', async () => {
    const first = 'POST /livez HTTP/1.0\r\nHost: gw\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n';
    const second = 'GET /openapi.json HTTP/1.1\r\nHost: gw\r\n\r\n';
    const connection = await RawConnection.open(gateway.port);
    connection.write(first + second);
    const outcome = await connection.outcome(3000);

    expect(outcome.closedByServer).toBe(true);
    expect(responsesIn(outcome.data)).toHaveLength(1);
    expect(gateway.logs.some((line) => line.includes('"route":"/openapi.json"'))).toBe(false);

    // The same two requests over HTTP/1.1 framing are both answered: the close is the 1.0 rule.
    const control = await RawConnection.open(gateway.port);
    control.write('POST /livez HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n' + second);
    const controlOutcome = await control.outcome(1500);
    expect(responsesIn(controlOutcome.data).map((response) => response.status)).toHaveLength(2);
    expect(controlOutcome.closedByServer).toBe(false);
  });

  it('refuses an x-request-id that could be an API key and mints a fresh one, never echoing or logging it', async () => {
    const keyLike = generateSecret();
    const response = await fetch(`${gateway.url}/v1/models`, { headers: { ...project.auth, 'x-request-id': keyLike } });
    expect(response.status).toBe(200);
    const id = response.headers.get('x-request-id')!;
    expect(id).toMatch(/^req_[0-9A-Za-z]{22}$/);
    expect(await response.text()).not.toContain(keyLike);

    const kept = await fetch(`${gateway.url}/v1/models`, { headers: { ...project.auth, 'x-request-id': 'trace-42.a' } });
    expect(kept.headers.get('x-request-id')).toBe('trace-42.a');

    await gateway.waitForLog((line) => line.includes(id));
    expect(gateway.logs.some((line) => line.includes(keyLike.slice(8)))).toBe(false);
  });

  it('refuses duplicate Authorization headers with 400 naming authorization', async () => {
    const request = (authorizations: string[]) =>
      `GET /v1/models HTTP/1.1\r\nHost: gw\r\n${authorizations.map((value) => `Authorization: ${value}\r\n`).join('')}Connection: close\r\n\r\n`;

    const twice = await RawConnection.open(gateway.port);
    twice.write(request([project.auth.authorization, 'Bearer nova_sk_other']));
    expect(responsesIn((await twice.outcome(3000)).data)).toEqual([
      { status: 400, body: { error: expect.objectContaining({ code: 'invalid_parameter', param: 'authorization' }) } },
    ]);

    const once = await RawConnection.open(gateway.port);
    once.write(request([project.auth.authorization]));
    expect(responsesIn((await once.outcome(3000)).data).map((response) => response.status)).toEqual([200]);
  });
});
