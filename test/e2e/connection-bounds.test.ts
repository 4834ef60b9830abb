import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { randomBase62 } from '../../src/core/ids.js';
import { GatewayProcess } from '../support/gateway-process.js';
import { RawConnection, responsesIn } from '../support/raw-http.js';
import type { TestProject } from '../support/test-app.js';

const ADMIN_TOKEN = `e2e-admin-${randomBase62(24)}`;
const LIVEZ = 'GET /livez HTTP/1.1\r\nHost: gw\r\n\r\n';

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? Number.NaN;
}

async function metricsText(gateway: GatewayProcess): Promise<string> {
  return (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
}

function refusedCount(text: string, reason: string): number {
  const match = new RegExp(`^nova_connections_refused_total\\{reason="${reason}"\\} (\\d+)`, 'm').exec(text);
  return match ? Number(match[1]) : 0;
}

const isPressureLine = (line: string, reason: string) => line.includes('connection pressure:') && line.includes(`"reason":"${reason}"`);
const pressureLines = (gateway: GatewayProcess, reason: string) => gateway.logs.filter((line) => isPressureLine(line, reason));

/** One client that writes `count` pipelined GET /livez at once; resolves with the answers seen when the server closes or the deadline passes. */
function pipelineFlood(port: number, count: number, until: number): Promise<number> {
  return new Promise((resolve) => {
    let answers = 0;
    let tail = '';
    const socket: Socket = connect({ port, host: '127.0.0.1' });
    socket.setEncoding('latin1');
    socket.on('connect', () => socket.write(LIVEZ.repeat(count), 'latin1'));
    socket.on('data', (chunk: string) => {
      const text = tail + chunk;
      answers += text.split('HTTP/1.1 200').length - 1;
      tail = text.slice(-16);
      if (answers >= count) socket.destroy();
    });
    socket.on('error', () => {});
    const timer = setTimeout(() => socket.destroy(), Math.max(0, until - Date.now()));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answers);
    });
  });
}

/**
 * The real process under connection pressure before any authentication (DESIGN.md section 7,
 * "Bounded before authenticated"; issue 30): pipelining floods, many held bodies under a small
 * file-descriptor limit, and a body that trickles in.
 */
describe('connection bounds against the real process', () => {
  describe('pipelining and slow bodies', () => {
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
  body_min_bytes_per_second: 100
  body_min_rate_grace_ms: 1000
redis:
  key_prefix: e2e${randomBase62(8)}
`,
      });
      project = await gateway.createProject({ name: 'connection bounds' });
    });

    afterAll(async () => {
      await gateway?.stop();
    });

    it('answers a client that pipelines a few dozen requests, each in order', async () => {
      const connection = await RawConnection.open(gateway.port);
      connection.write(LIVEZ.repeat(40) + 'GET /livez HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
      const outcome = await connection.outcome(5000);
      expect(outcome.closedByServer).toBe(true);
      expect(responsesIn(outcome.data).map((response) => response.status)).toEqual(Array(41).fill(200));
    });

    it("keeps another client's /livez p99 under 100 ms while 10 connections pipeline thousands of requests without a key", { timeout: 30_000, retry: 1 }, async () => {
      const probeFor = async (ms: number) => {
        const latencies: number[] = [];
        const end = Date.now() + ms;
        while (Date.now() < end) {
          const started = performance.now();
          const response = await fetch(`${gateway.url}/livez`, { signal: AbortSignal.timeout(10_000) });
          await response.arrayBuffer();
          latencies.push(performance.now() - started);
          await sleep(10);
        }
        return latencies;
      };
      const idle = await probeFor(500);

      // Each of 10 clients writes 20,000 pipelined requests (720 KB), again whenever its connection ends, for 4 s.
      const until = Date.now() + 4000;
      let answered = 0;
      const flooders = Array.from({ length: 10 }, async () => {
        while (Date.now() < until) answered += await pipelineFlood(gateway.port, 20_000, until);
      });
      await sleep(200);
      const underFlood = await probeFor(3500);
      await Promise.all(flooders);

      const p99 = percentile(underFlood, 99);
      console.log(
        `pipelining: idle p50 ${percentile(idle, 50).toFixed(1)} ms; under flood p50 ${percentile(underFlood, 50).toFixed(1)} ms, ` +
          `p99 ${p99.toFixed(1)} ms, max ${Math.max(...underFlood).toFixed(1)} ms over ${underFlood.length} probes; ${answered} flood answers`,
      );
      expect(underFlood.length).toBeGreaterThan(20);
      expect(p99).toBeLessThan(100);
      const text = await metricsText(gateway);
      expect(refusedCount(text, 'pipelining')).toBeGreaterThan(0);
      await gateway.waitForLog((line) => isPressureLine(line, 'pipelining'), 5000);
      expect(pressureLines(gateway, 'pipelining')).toHaveLength(1);
      // A latency percentile on two cores the rest of the suite shares: one more measurement when a
      // neighbour took the core (the CI run measured 129 ms once), the same 100 ms bound.
    });

    it('cuts a body that arrives at one byte a second after the grace period, with 408', async () => {
      const connection = await RawConnection.open(gateway.port);
      connection.write(
        'POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n' +
          `Authorization: Bearer ${project.secret}\r\nContent-Length: 1000\r\n\r\n{`,
      );
      const trickle = setInterval(() => connection.socket.writable && connection.write(' '), 1000);
      const outcome = await connection.outcome(8000).finally(() => clearInterval(trickle));
      console.log(`slow body: closed by server ${outcome.closedByServer} after ${outcome.closedAfterMs} ms`);

      // Grace 1 s, plus 10 ms per byte received (100 B/s), plus the 1 s check interval and scheduling slack.
      expect(outcome.closedByServer).toBe(true);
      expect(outcome.closedAfterMs).toBeGreaterThanOrEqual(1000);
      expect(outcome.closedAfterMs).toBeLessThan(4000);
      expect(responsesIn(outcome.data).map((response) => response.status)).toEqual([408]);
      expect(refusedCount(await metricsText(gateway), 'slow_body')).toBe(1);
      await gateway.waitForLog((line) => isPressureLine(line, 'slow_body'), 5000);
      expect(pressureLines(gateway, 'slow_body')).toHaveLength(1);
    }, 15_000);
  });

  describe('under a file-descriptor limit of 4096', () => {
    let gateway: GatewayProcess;
    let project: TestProject;
    let wrapperDir: string;
    const held: Socket[] = [];

    beforeAll(async () => {
      // GatewayProcess runs NOVA_GATEWAY_NODE as the server's Node: a wrapper that lowers the limit first.
      wrapperDir = mkdtempSync(join(tmpdir(), 'nova-nofile-'));
      const wrapper = join(wrapperDir, 'node-nofile-4096');
      writeFileSync(wrapper, `#!/bin/sh\nulimit -n 4096 || exit 97\nexec "${process.execPath}" "$@"\n`);
      chmodSync(wrapper, 0o755);
      const previous = process.env.NOVA_GATEWAY_NODE;
      process.env.NOVA_GATEWAY_NODE = wrapper;
      try {
        gateway = await GatewayProcess.start({
          env: { REDIS_URL: inject('redisUrl'), NOVA_ADMIN_TOKEN: ADMIN_TOKEN },
          configYaml: `
models:
  - id: echo-1
    provider: echo
redis:
  key_prefix: e2e${randomBase62(8)}
`,
        });
      } finally {
        if (previous === undefined) delete process.env.NOVA_GATEWAY_NODE;
        else process.env.NOVA_GATEWAY_NODE = previous;
      }
      project = await gateway.createProject({ name: 'held bodies' });
    });

    afterAll(async () => {
      for (const socket of held) socket.destroy();
      await gateway?.stop();
      rmSync(wrapperDir, { recursive: true, force: true });
    });

    it('still serves a sixth address while 5 addresses hold 4,500 incomplete bodies, and logs the refusal once', async () => {
      const body =
        'POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n' +
        `Authorization: Bearer ${project.secret}\r\nContent-Length: 100\r\n\r\n{`;
      let refusedOrFailed = 0;
      const openOne = (localAddress: string) =>
        new Promise<void>((resolve) => {
          const socket = connect({ port: gateway.port, host: '127.0.0.1', localAddress });
          socket.on('error', () => {});
          socket.once('connect', () => {
            socket.write(body);
            held.push(socket);
            resolve();
          });
          socket.once('close', () => {
            refusedOrFailed += 1;
            resolve();
          });
        });
      const started = Date.now();
      for (let batch = 0; batch < 9; batch += 1) {
        const opening: Array<Promise<void>> = [];
        for (let address = 2; address <= 6; address += 1) {
          for (let i = 0; i < 100; i += 1) opening.push(openOne(`127.0.0.${address}`));
        }
        await Promise.all(opening);
      }
      await sleep(500);
      const openedMs = Date.now() - started;

      const probe = await RawConnection.open(gateway.port, { localAddress: '127.0.0.7' }).catch(() => undefined);
      probe?.write('GET /livez HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n');
      const outcome = await probe?.outcome(5000);
      const stillOpen = held.filter((socket) => !socket.destroyed).length;
      console.log(
        `held bodies: ${stillOpen} open of 4,500 after ${openedMs} ms (${refusedOrFailed} closed); ` +
          `sixth address: ${outcome ? responsesIn(outcome.data).map((r) => r.status).join(',') || 'no answer' : 'no connection'}` +
          (outcome?.firstByteAfterMs != null ? ` after ${outcome.firstByteAfterMs} ms` : ''),
      );
      expect(outcome && responsesIn(outcome.data).map((response) => response.status)).toEqual([200]);

      const text = await metricsText(gateway);
      const refused = ['per_address', 'total', 'fd'].reduce((sum, reason) => sum + refusedCount(text, reason), 0);
      expect(refused).toBeGreaterThan(0);
      expect(refused).toBeGreaterThanOrEqual(4500 - stillOpen);
      expect(Number(/^nova_connections_open (\d+)/m.exec(text)?.[1])).toBeGreaterThanOrEqual(stillOpen);
      await gateway.waitForLog((line) => line.includes('connection pressure:'), 5000);
      expect(gateway.logs.filter((line) => line.includes('connection pressure:'))).toHaveLength(1);
    }, 30_000);
  });
});
