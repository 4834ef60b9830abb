#!/usr/bin/env node
/* global process, console */
// `npm start`'s prestart: compiles TypeScript only when dist/ is missing or older than its sources,
// and builds the web console (Vite, into dist/console) only when it is missing or older than
// src/console, so a start after an unchanged checkout builds nothing. Plain JavaScript: it runs
// before any build and without dev tooling. A production install (no TypeScript) with a dist/ never builds.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where a successful build leaves its mark; its time is the build's. */
export const STAMP = join('dist', '.build-stamp');
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];
/** The console's own mark: beside dist/console, which each Vite build empties. */
export const CONSOLE_STAMP = join('dist', '.console-build-stamp');
const CONSOLE_SOURCE = join('src', 'console');
const CONSOLE_INPUTS = [CONSOLE_SOURCE, 'package.json'];

/** The newest change under `path`; `skip` (a path under it) is left out: the server's build ignores the console's source. */
function newestMtime(path, skip) {
  if (!existsSync(path) || path === skip) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(path).reduce((newest, entry) => Math.max(newest, newestMtime(join(path, entry), skip)), stat.mtimeMs);
}

/** Why dist/ must be built, or null when it is up to date. */
export function staleReason(root) {
  const stamp = join(root, STAMP);
  if (!existsSync(join(root, 'dist', 'src', 'server.js')) || !existsSync(stamp)) return 'dist/ has no complete build';
  const built = statSync(stamp).mtimeMs;
  const changed = INPUTS.find((input) => newestMtime(join(root, input), join(root, CONSOLE_SOURCE)) > built);
  return changed === undefined ? null : `${changed} changed since the last build`;
}

/** Why dist/console must be built, or null when it is up to date. */
export function consoleStaleReason(root) {
  const stamp = join(root, CONSOLE_STAMP);
  if (!existsSync(join(root, 'dist', 'console', 'index.html')) || !existsSync(stamp)) return 'dist/console has no complete build';
  const built = statSync(stamp).mtimeMs;
  const changed = CONSOLE_INPUTS.find((input) => newestMtime(join(root, input)) > built);
  return changed === undefined ? null : `${changed} changed since the console's last build`;
}

/** Builds the web console (src/console/vite.config.ts) into dist/console with Vite's own CLI on this Node. */
export function buildConsole(root) {
  const vite = join(root, 'node_modules', 'vite', 'bin', 'vite.js');
  if (!existsSync(vite)) throw new Error('Vite is not installed (npm ci without --omit=dev) to build the web console');
  const config = join(CONSOLE_SOURCE, 'vite.config.ts');
  const result = spawnSync(process.execPath, [vite, 'build', '--config', config, '--logLevel', 'warn'], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) throw new Error('the web console build failed (see above)');
  writeFileSync(join(root, CONSOLE_STAMP), `${new Date().toISOString()}\n`);
}

/** `npm run build`: the server and the console, whatever their stamps say. */
export function buildAll(root) {
  build(root);
  buildConsole(root);
}

/** Compiles src/ into `outDir` (default dist/, whose stamp it then writes); `npm run build`, the prestart and the bench build through it. */
export function build(root, outDir = 'dist') {
  const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
  if (!existsSync(tsc)) throw new Error('TypeScript is not installed (npm ci without --omit=dev) to build it');
  const result = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', outDir], { cwd: root, stdio: 'inherit' });
  if (result.status !== 0) throw new Error('the TypeScript build failed (see above)');
  // tsc leaves the Lua scripts (src/**/*.lua, read beside their callers) behind.
  for (const file of readdirSync(join(root, 'src'), { recursive: true })) {
    if (file.endsWith('.lua')) cpSync(join(root, 'src', file), join(root, outDir, 'src', file));
  }
  if (outDir === 'dist') writeFileSync(join(root, STAMP), `${new Date().toISOString()}\n`);
}

export function buildIfStale(root) {
  const reason = staleReason(root);
  if (reason !== null) {
    console.error(`nova-gateway: building (${reason})`);
    build(root);
  }
  const consoleBuilt = buildConsoleIfStale(root);
  return { built: reason !== null || consoleBuilt.built };
}

export function buildConsoleIfStale(root) {
  const reason = consoleStaleReason(root);
  if (reason === null) return { built: false };
  console.error(`nova-gateway: building the web console (${reason})`);
  buildConsole(root);
  return { built: true };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    if (process.argv.includes('--always')) buildAll(process.cwd());
    else buildIfStale(process.cwd());
  } catch (error) {
    console.error(`nova-gateway: ${error.message}`);
    process.exit(1);
  }
}
