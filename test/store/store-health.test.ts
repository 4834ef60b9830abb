import { EventEmitter } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { judgeServer } from '../../src/store/redis/server-checks.js';
import { describeStoreError } from '../../src/store/store-errors.js';
import { StoreHealth } from '../../src/store/store-health.js';
import { StoreUnavailableError } from '../../src/store/types.js';

function recordingLog() {
  const lines: { level: 'info' | 'warn'; message: string; fields: Record<string, unknown> }[] = [];
  return {
    lines,
    info: (fields: object, message: string) => lines.push({ level: 'info', message, fields: fields as Record<string, unknown> }),
    warn: (fields: object, message: string) => lines.push({ level: 'warn', message, fields: fields as Record<string, unknown> }),
  };
}

const refused = () => Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6399'), { code: 'ECONNREFUSED' });

describe('StoreHealth', () => {
  it('names a connection that closed without an error "connection closed", when a request notices before the client does', () => {
    const log = recordingLog();
    const client = new EventEmitter();
    const health = new StoreHealth({ target: '127.0.0.1:6399', ping: async () => undefined, log }).watch(client);
    health.begin(true);
    // Redis closed the socket (SHUTDOWN): no 'error' event, and a request fails before 'close' arrives.
    health.failed(new StoreUnavailableError(new Error("Stream isn't writeable and enableOfflineQueue options is false")));
    client.emit('close');
    expect(log.lines.map((line) => line.fields.cause)).toEqual(['connection closed']);
    health.close();

    // Never connected at all: that is what it says.
    const startLog = recordingLog();
    const starting = new StoreHealth({ target: '127.0.0.1:6399', ping: async () => undefined, log: startLog });
    starting.begin(false);
    starting.failed(new StoreUnavailableError(new Error("Stream isn't writeable and enableOfflineQueue options is false")));
    expect(startLog.lines.map((line) => line.fields.cause)).toEqual(['connection timed out']);
    starting.close();
  });

  it('logs one warn line per outage however many operations fail, and one info line when it ends', async () => {
    const log = recordingLog();
    const client = new EventEmitter();
    let clock = 1_000;
    let answering = true;
    const health = new StoreHealth({
      target: '127.0.0.1:6399',
      ping: async () => {
        if (!answering) throw new StoreUnavailableError(new Error('Command timed out'));
      },
      log,
      probeIntervalMs: 10,
      now: () => clock,
    }).watch(client);
    health.begin(true);
    expect(health.reachable).toBe(true);

    answering = false;
    client.emit('error', refused());
    client.emit('close');
    for (let i = 0; i < 50; i++) health.failed(new StoreUnavailableError(new Error("Stream isn't writeable and enableOfflineQueue options is false")));
    expect(health.reachable).toBe(false);
    expect(log.lines).toEqual([
      {
        level: 'warn',
        message:
          'Redis at 127.0.0.1:6399 is unreachable (connection refused): requests that need it answer 503 until it is back; failures are counted in nova_redis_errors_total',
        fields: { store: '127.0.0.1:6399', cause: 'connection refused' },
      },
    ]);

    await sleep(50); // probes keep failing: nothing more is logged
    expect(log.lines).toHaveLength(1);
    clock += 2_500;
    answering = true;
    await sleep(50); // the next probe succeeds
    expect(health.reachable).toBe(true);
    expect(log.lines[1]).toEqual({
      level: 'info',
      message: 'Redis at 127.0.0.1:6399 is reachable again after 2.5 s; 50 store operations failed meanwhile',
      fields: { store: '127.0.0.1:6399', down_ms: 2500, failed_operations: 50, address: undefined },
    });
    health.close();
  });

  it('says at start-up why the store is not reachable, then that it is, and emits up once', async () => {
    const log = recordingLog();
    const client = new EventEmitter();
    const health = new StoreHealth({ target: '127.0.0.1:6399', ping: async () => undefined, log, probeIntervalMs: 60_000 }).watch(client);
    const ups: unknown[] = [];
    health.on('up', (address) => ups.push(address));
    client.emit('error', refused());
    health.begin(false);
    expect(log.lines[0]!.message).toBe('Redis at 127.0.0.1:6399 is not reachable (connection refused): not ready (/readyz answers 503) until it is');
    client.emit('ready');
    client.emit('ready');
    expect(log.lines[1]!.message).toBe('Redis at 127.0.0.1:6399 is reachable');
    expect(ups).toHaveLength(1);
    health.close();
    client.emit('close');
    expect(log.lines).toHaveLength(2);
  });
});

describe('describeStoreError', () => {
  it.each([
    [refused(), 'connection refused'],
    [new StoreUnavailableError(new Error('Command timed out')), 'commands time out (redis.command_timeout_ms)'],
    [new Error('WRONGPASS invalid username-password pair'), 'authentication failed: check the credentials in REDIS_URL'],
    [new Error('LOADING Redis is loading the dataset in memory'), 'Redis is loading its dataset'],
    [new Error('something\nelse'), 'something'],
  ])('%s -> %s', (error, cause) => {
    expect(describeStoreError(error)).toBe(cause);
  });
});

describe('judgeServer', () => {
  it('warns about an evicting policy and missing persistence, naming the setting', () => {
    const verdict = judgeServer({ version: '7.0.15', maxmemoryPolicy: 'allkeys-lru', appendonly: false, save: '' });
    expect(verdict.warnings).toEqual([
      'Redis maxmemory-policy is allkeys-lru: when memory runs out Redis evicts keys, including API keys and projects; set maxmemory-policy noeviction',
      'Redis persistence is off (appendonly no, save ""): a Redis restart loses every project and API key; set appendonly yes',
    ]);
  });

  it('notes RDB-only persistence, warns about an old version, and is quiet on noeviction with AOF', () => {
    expect(judgeServer({ version: '7.2.4', maxmemoryPolicy: 'noeviction', appendonly: false, save: '3600 1' })).toEqual({
      warnings: [],
      notes: ['Redis persistence is RDB snapshots only (appendonly no): a crash loses what changed since the last snapshot; appendonly yes is recommended'],
    });
    expect(judgeServer({ version: '6.0.9', maxmemoryPolicy: 'noeviction', appendonly: true, save: '' }).warnings).toEqual([
      'Redis 6.0.9 is older than 6.2, the oldest version nova-gateway supports: upgrade Redis',
    ]);
    expect(judgeServer({ version: '6.2.0', maxmemoryPolicy: 'noeviction', appendonly: true, save: '' })).toEqual({ warnings: [], notes: [] });
    // CONFIG refused (managed Redis): what INFO told is judged, nothing is guessed.
    expect(judgeServer({ version: '7.0.0', maxmemoryPolicy: undefined, appendonly: undefined, save: undefined })).toEqual({ warnings: [], notes: [] });
  });
});
