import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { askRedis, freePort, killAll, pollUntil, waitForRedis } from './redis-server.js';

/**
 * A 3-master Redis Cluster of `redis-server --cluster-enabled yes` processes on loopback
 * ports, joined with `redis-cli --cluster create … --cluster-replicas 0`.
 */
export class RedisCluster {
  private constructor(
    private readonly children: ChildProcess[],
    readonly ports: number[],
    private readonly dir: string,
  ) {}

  /**
   * A port found free can be taken by a parallel test before its node binds it (the node then
   * exits and never answers): a failed start is retried on new ports, three times in all.
   */
  static async start(masters = 3): Promise<RedisCluster> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await RedisCluster.startOnce(masters);
      } catch (error) {
        if (attempt === 3) throw error;
      }
    }
  }

  private static async startOnce(masters: number): Promise<RedisCluster> {
    const dir = mkdtempSync(join(tmpdir(), 'nova-cluster-'));
    const ports: number[] = [];
    const children: ChildProcess[] = [];
    for (let i = 0; i < masters; i++) {
      const port = await freePort();
      // The bus port is set explicitly (port + 10000 may be taken or out of range).
      const busPort = await freePort();
      ports.push(port);
      const nodeDir = join(dir, String(port));
      spawnSync('mkdir', ['-p', nodeDir]);
      children.push(
        spawn(
          'redis-server',
          [
            '--port', String(port),
            '--cluster-port', String(busPort),
            '--bind', '127.0.0.1',
            '--dir', nodeDir,
            '--cluster-enabled', 'yes',
            '--cluster-config-file', 'nodes.conf',
            '--cluster-node-timeout', '5000',
            '--save', '',
            '--appendonly', 'no',
          ],
          { stdio: 'ignore' },
        ),
      );
    }
    const cluster = new RedisCluster(children, ports, dir);
    try {
      await Promise.all(ports.map((port) => waitForRedis(`redis://127.0.0.1:${port}`)));
      const created = spawnSync(
        'redis-cli',
        ['--cluster', 'create', ...ports.map((port) => `127.0.0.1:${port}`), '--cluster-replicas', '0', '--cluster-yes'],
        { encoding: 'utf8', timeout: 30_000 },
      );
      if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout}${created.stderr}`);
      await cluster.waitUntilOk();
      return cluster;
    } catch (error) {
      await cluster.stop();
      throw error;
    }
  }

  /** The seed list REDIS_URL takes with REDIS_MODE=cluster. */
  get url(): string {
    return this.ports.map((port) => `redis://127.0.0.1:${port}`).join(',');
  }

  private async waitUntilOk(timeoutMs = 20_000): Promise<void> {
    await pollUntil(
      async () => {
        const states = await Promise.all(this.ports.map(async (port) => String(await askRedis(port, ['CLUSTER', 'INFO']))));
        return states.every((info) => info.includes('cluster_state:ok'));
      },
      timeoutMs,
      'cluster not ok',
    );
  }

  async stop(): Promise<void> {
    await killAll(this.children);
    rmSync(this.dir, { recursive: true, force: true });
  }
}
