/**
 * Runs wrk (one thread, N connections) against one URL and reads its figures from a Lua `done`
 * hook as JSON, so nothing is parsed from wrk's human output.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface WrkRequest {
  url: string;
  method?: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
}

export interface WrkResult {
  rps: number;
  requests: number;
  p50_ms: number;
  p99_ms: number;
  /** Non-2xx answers plus socket errors and timeouts. */
  errors: number;
}

const luaString = (value: string) => `"${value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`;

function script(request: WrkRequest): string {
  const dir = mkdtempSync(join(tmpdir(), 'nova-wrk-'));
  const file = join(dir, 'request.lua');
  const headers = Object.entries({ ...(request.body ? { 'content-type': 'application/json' } : {}), ...request.headers })
    .map(([name, value]) => `wrk.headers[${luaString(name)}] = ${luaString(value)}`)
    .join('\n');
  writeFileSync(
    file,
    `wrk.method = ${luaString(request.method ?? 'POST')}
${request.body ? `wrk.body = ${luaString(request.body)}` : ''}
${headers}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK_JSON {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"errors":%d}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
`,
  );
  return file;
}

export async function wrk(request: WrkRequest, options: { connections: number; seconds: number }): Promise<WrkResult> {
  const file = script(request);
  const { stdout } = await run('wrk', ['-t1', `-c${options.connections}`, `-d${options.seconds}s`, '--timeout', '10s', '-s', file, request.url]).finally(() =>
    rmSync(dirname(file), { recursive: true, force: true }),
  );
  const line = stdout.split('\n').find((l) => l.startsWith('WRK_JSON '));
  if (!line) throw new Error(`wrk printed no figures:\n${stdout}`);
  const raw = JSON.parse(line.slice('WRK_JSON '.length)) as {
    requests: number;
    duration_us: number;
    p50_us: number;
    p99_us: number;
    errors: number;
  };
  return {
    rps: Math.round(raw.requests / (raw.duration_us / 1e6)),
    requests: raw.requests,
    p50_ms: Number((raw.p50_us / 1000).toFixed(3)),
    p99_ms: Number((raw.p99_us / 1000).toFixed(3)),
    errors: raw.errors,
  };
}
