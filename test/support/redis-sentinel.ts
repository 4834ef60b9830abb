import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { askRedis, freePort, killAll, pollUntil, RedisProcess, waitForRedis } from './redis-server.js';

export const MASTER_GROUP = 'nova';

/** `redis-sentinel` when installed (Debian's redis-sentinel package), else `redis-server --sentinel`: the same binary. */
function sentinelCommand(config: string): [string, string[]] {
  if (spawnSync('redis-sentinel', ['--version'], { stdio: 'ignore' }).status === 0) return ['redis-sentinel', [config]];
  return ['redis-server', [config, '--sentinel']];
}

/**
 * A master, one replica and three sentinels (quorum 2) on loopback ports: what REDIS_MODE=sentinel
 * connects to. The master can be killed to make the sentinels fail over to the replica.
 */
export class RedisSentinelGroup {
  private constructor(
    readonly master: RedisProcess,
    readonly replica: RedisProcess,
    private readonly sentinels: ChildProcess[],
    readonly sentinelPorts: number[],
    private readonly dir: string,
  ) {}

  static async start(): Promise<RedisSentinelGroup> {
    const master = await RedisProcess.start();
    const replica = await RedisProcess.start({ args: ['--replicaof', '127.0.0.1', String(master.port)] });
    const dir = mkdtempSync(join(tmpdir(), 'nova-sentinel-'));
    const sentinelPorts: number[] = [];
    const sentinels: ChildProcess[] = [];
    const group = new RedisSentinelGroup(master, replica, sentinels, sentinelPorts, dir);
    try {
      for (let i = 0; i < 3; i++) {
        const port = await freePort();
        const config = join(dir, `sentinel-${port}.conf`);
        // Sentinel rewrites its config file, so each gets its own, writable.
        writeFileSync(
          config,
          [
            `port ${port}`,
            'bind 127.0.0.1',
            `dir ${dir}`,
            `sentinel monitor ${MASTER_GROUP} 127.0.0.1 ${master.port} 2`,
            `sentinel down-after-milliseconds ${MASTER_GROUP} 1000`,
            `sentinel failover-timeout ${MASTER_GROUP} 10000`,
            `sentinel parallel-syncs ${MASTER_GROUP} 1`,
            '',
          ].join('\n'),
        );
        const [command, args] = sentinelCommand(config);
        sentinels.push(spawn(command, args, { stdio: 'ignore' }));
        sentinelPorts.push(port);
      }
      await Promise.all(sentinelPorts.map((port) => waitForRedis(`redis://127.0.0.1:${port}`)));
      await group.waitUntil(async () => (await group.replicaInSync()) && (await group.sentinelsSeeEachOther()), 20_000);
      return group;
    } catch (error) {
      await group.stop();
      throw error;
    }
  }

  /** REDIS_URL for REDIS_MODE=sentinel: the sentinels. */
  get url(): string {
    return this.sentinelPorts.map((port) => `redis://127.0.0.1:${port}`).join(',');
  }

  /** The master's port according to the first sentinel that answers. */
  async masterPort(): Promise<number | undefined> {
    for (const port of this.sentinelPorts) {
      const reply = await askRedis(port, ['SENTINEL', 'get-master-addr-by-name', MASTER_GROUP]).catch(() => null);
      if (Array.isArray(reply)) return Number(reply[1]);
    }
    return undefined;
  }

  /** Kills the master (SIGKILL): the sentinels notice after down-after-milliseconds and promote the replica. */
  async killMaster(): Promise<void> {
    await this.master.stop();
  }

  async waitUntil(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    await pollUntil(() => check().catch(() => false), timeoutMs, 'sentinel group: condition not met');
  }

  async stop(): Promise<void> {
    await killAll(this.sentinels);
    await this.replica.stop();
    await this.master.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async replicaInSync(): Promise<boolean> {
    const info = (await askRedis(this.replica.port, ['INFO', 'replication'])) as string;
    return /master_link_status:up/.test(info);
  }

  private async sentinelsSeeEachOther(): Promise<boolean> {
    for (const port of this.sentinelPorts) {
      const master = (await askRedis(port, ['SENTINEL', 'master', MASTER_GROUP])) as string[];
      const field = (name: string) => master[master.indexOf(name) + 1];
      if (Number(field('num-other-sentinels')) < 2 || Number(field('num-slaves')) < 1) return false;
    }
    return true;
  }
}
