/**
 * nginx as a reference proxy when it is installed: one worker, keep-alive to the upstream, no
 * buffering (streams pass event by event), no access log. Returns null when there is no nginx.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function nginxInstalled(): string | null {
  for (const binary of ['nginx', '/usr/sbin/nginx']) {
    if (spawnSync(binary, ['-v'], { stdio: 'ignore' }).status === 0) return binary;
  }
  return null;
}

/** Starts nginx in the foreground under `launcher` (taskset or nothing) on `port`. */
export function startNginx(binary: string, launcher: string[], port: number, upstreamPort: number): ChildProcess {
  const dir = mkdtempSync(join(tmpdir(), 'nova-nginx-'));
  const config = join(dir, 'nginx.conf');
  writeFileSync(
    config,
    `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  upstream model { server 127.0.0.1:${upstreamPort}; keepalive 64; }
  server {
    listen 127.0.0.1:${port};
    keepalive_requests 1000000;
    location /v1/ {
      proxy_pass http://model/fixed/v1/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`,
  );
  const [command, ...args] = [...launcher, binary, '-c', config, '-p', dir];
  const child = spawn(command!, args, { stdio: ['ignore', 'ignore', 'inherit'] });
  child.once('exit', () => rmSync(dir, { recursive: true, force: true }));
  return child;
}
