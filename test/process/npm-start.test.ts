import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { CONSOLE_STAMP, consoleStaleReason, STAMP, staleReason } from '../../scripts/build-if-stale.mjs';
import { dockerfileFlags, npmStartFlags } from '../../scripts/node-flags.js';
import { freePort } from '../support/redis-server.js';

const ROOT = new URL('../../', import.meta.url).pathname;

/** The command line of the process running dist/src/server.js below `pid` (npm, its shell, node). */
function serverCommandLine(pid: number): string[] | undefined {
  const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  if (cmdline.includes('dist/src/server.js')) return cmdline;
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
  for (const child of children) {
    const found = serverCommandLine(Number(child));
    if (found) return found;
  }
  return undefined;
}

describe('Node flags of the server', () => {
  it('are the same in the Dockerfile and in npm start, keep the heap sized after idle, and are taken by this Node', () => {
    const npmStart = npmStartFlags(ROOT);
    expect(dockerfileFlags(ROOT)).toEqual(npmStart);
    // The README's "Node flags": V8's memory reducer shrinks an idle heap, and the next burst then runs on it.
    expect(npmStart).toContain('--no-memory-reducer');
    const run = spawnSync(process.execPath, [...npmStart, '-e', '0'], { encoding: 'utf8' });
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
  });
});

describe('prestart: build only when dist/ is missing or stale', () => {
  let root: string;
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const at = (path: string, seconds: number) => utimesSync(join(root, path), seconds, seconds);

  it('builds when dist/ is missing, not when it is newer than the sources, again when a source changes', () => {
    root = mkdtempSync(join(tmpdir(), 'nova-start-'));
    mkdirSync(join(root, 'src'));
    writeFileSync(join(root, 'src', 'server.ts'), '');
    writeFileSync(join(root, 'package.json'), '{}');
    at('src/server.ts', 1000);
    at('src', 1000);
    at('package.json', 1000);
    expect(staleReason(root)).toBe('dist/ has no complete build');

    mkdirSync(join(root, 'dist', 'src'), { recursive: true });
    writeFileSync(join(root, 'dist', 'src', 'server.js'), '');
    expect(staleReason(root)).toBe('dist/ has no complete build');
    writeFileSync(join(root, STAMP), '');
    at(STAMP, 2000);
    expect(staleReason(root)).toBeNull();

    at('src/server.ts', 3000);
    expect(staleReason(root)).toBe('src changed since the last build');
    at('src/server.ts', 1000);
    at('package.json', 3000);
    expect(staleReason(root)).toBe('package.json changed since the last build');
  });

  it('builds the console when dist/console is missing or older than src/console; a console change does not rebuild the server', () => {
    root = mkdtempSync(join(tmpdir(), 'nova-start-'));
    mkdirSync(join(root, 'src', 'console'), { recursive: true });
    writeFileSync(join(root, 'src', 'console', 'app.tsx'), '');
    writeFileSync(join(root, 'package.json'), '{}');
    for (const path of ['src/console/app.tsx', 'src/console', 'src', 'package.json']) at(path, 1000);
    expect(consoleStaleReason(root)).toBe('dist/console has no complete build');

    mkdirSync(join(root, 'dist', 'src'), { recursive: true });
    mkdirSync(join(root, 'dist', 'console'));
    writeFileSync(join(root, 'dist', 'src', 'server.js'), '');
    writeFileSync(join(root, 'dist', 'console', 'index.html'), '');
    writeFileSync(join(root, STAMP), '');
    writeFileSync(join(root, CONSOLE_STAMP), '');
    at(STAMP, 2000);
    at(CONSOLE_STAMP, 2000);
    expect(consoleStaleReason(root)).toBeNull();

    at('src/console/app.tsx', 3000);
    expect(consoleStaleReason(root)).toBe("src/console changed since the console's last build");
    expect(staleReason(root)).toBeNull();
  });
});

/** `npm start` in this checkout: the second start compiles nothing, and SIGTERM to npm stops the server. */
describe('npm start', () => {
  const start = async () => {
    const port = await freePort();
    const child = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', METRICS_PORT: '0', REDIS_URL: '', NOVA_ADMIN_TOKEN: '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const output: string[] = [];
    child.stdout.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    const deadline = Date.now() + 90_000;
    for (;;) {
      const ready = await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false);
      if (ready) break;
      if (child.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not get ready:\n${output.join('')}`);
      await sleep(200);
    }
    return { child, port, output, exited };
  };

  it('starts the built server without compiling when dist/ is fresh, and SIGTERM to npm stops node', async () => {
    const first = await start(); // may build: the checkout's dist/ may be missing or stale
    first.child.kill('SIGTERM');
    expect(await first.exited).not.toBeNull();
    expect(staleReason(ROOT)).toBeNull();
    expect(consoleStaleReason(ROOT)).toBeNull();

    const second = await start();
    // Neither the server nor the console ("nova-gateway: building the web console").
    expect(second.output.join('')).not.toContain('nova-gateway: building');
    // node runs with the start script's flags (npm's shell exec'd it).
    const commandLine = serverCommandLine(second.child.pid!);
    expect(commandLine?.slice(1, -1)).toEqual(npmStartFlags(ROOT));
    // npm's own PID, as a process manager would signal it.
    second.child.kill('SIGTERM');
    await second.exited;
    const deadline = Date.now() + 10_000;
    let listening = true;
    while (listening && Date.now() < deadline) {
      listening = await fetch(`http://127.0.0.1:${second.port}/livez`).then(() => true, () => false);
      if (listening) await sleep(100);
    }
    expect(listening).toBe(false);
    expect(second.output.join('')).toContain('"msg":"stopped"');
  }, 180_000);
});
