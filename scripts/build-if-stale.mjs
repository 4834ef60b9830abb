#!/usr/bin/env node
/* global process, console */
// `npm start`'s prestart: compiles TypeScript only when dist/ is missing or older than its sources,
// so a start after an unchanged checkout takes no compile. Plain JavaScript: it runs before any
// build and without dev tooling. A production install (no TypeScript) with a dist/ never builds.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** Where a successful build leaves its mark; its time is the build's. */
export const STAMP = join('dist', '.build-stamp');
const INPUTS = ['src', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];

function newestMtime(path) {
  if (!existsSync(path)) return 0;
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return readdirSync(path).reduce((newest, entry) => Math.max(newest, newestMtime(join(path, entry))), stat.mtimeMs);
}

/** Why dist/ must be built, or null when it is up to date. */
export function staleReason(root) {
  const stamp = join(root, STAMP);
  if (!existsSync(join(root, 'dist', 'src', 'server.js')) || !existsSync(stamp)) return 'dist/ has no complete build';
  const built = statSync(stamp).mtimeMs;
  const changed = INPUTS.find((input) => newestMtime(join(root, input)) > built);
  return changed === undefined ? null : `${changed} changed since the last build`;
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
  if (reason === null) return { built: false };
  console.error(`nova-gateway: building (${reason})`);
  build(root);
  return { built: true };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    if (process.argv.includes('--always')) build(process.cwd());
    else buildIfStale(process.cwd());
  } catch (error) {
    console.error(`nova-gateway: ${error.message}`);
    process.exit(1);
  }
}
