#!/usr/bin/env node
/* global process, console, URL */
// The Python tools of the tests (test/python-requirements.txt: schemathesis for
// test/e2e/openapi-fuzz.test.ts, the official openai and anthropic SDKs for test/e2e/python-sdk.test.ts
// and test/e2e/python-anthropic-sdk.test.ts), in a virtualenv made on first use and kept in the user's cache, named after a hash of the requirements
// and of the Python it was made with: `npm test` needs only python3 (with its venv module).
// Plain JavaScript: .ci/run runs it (`node scripts/python-tools.mjs`) before npm ci.
//
// The virtualenv is made in a temporary directory and renamed into place once pip has finished, so
// a directory under its final name is always complete. A lock directory next to it keeps a second
// process (another test file, another run) from making it again meanwhile; a lock left by a dead
// process is taken over. The tools are run as `python -m ...`, never through bin/ scripts, whose
// first lines name the temporary directory.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const REQUIREMENTS = join(ROOT, 'test', 'python-requirements.txt');
const INSTALL_HINT = 'install Python 3 with its venv module (Debian/Ubuntu: apt-get install python3 python3-venv; Fedora: dnf install python3)';
/** A lock older than this is taken over whoever holds it (pip on a slow network takes a few minutes at most). */
const LOCK_STALE_MS = 20 * 60_000;

/** Where the virtualenvs are kept: $XDG_CACHE_HOME/nova-gateway, else ~/.cache/nova-gateway. */
export function cacheDir() {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'nova-gateway');
}

function run(command, args, options = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...options });
    let output = '';
    child.stdout.on('data', (chunk) => (output += chunk));
    child.stderr.on('data', (chunk) => (output += chunk));
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve({ code, signal, output }));
  });
}

/** The base interpreter (python3 on the PATH, or $NOVA_PYTHON3): its real path and version, or a clear error. */
function basePython() {
  const command = process.env.NOVA_PYTHON3 || 'python3';
  const probe = spawnSync(command, ['-c', 'import sys, venv, ensurepip; print(sys.executable); print(sys.version)'], { encoding: 'utf8' });
  if (probe.error) {
    throw new Error(`The Python tests need ${command}, which was not found (${probe.error.message}): ${INSTALL_HINT}.`);
  }
  if (probe.status !== 0) {
    throw new Error(`The Python tests need ${command} with the venv and ensurepip modules, which it lacks: ${INSTALL_HINT}.\n${probe.stderr.trim()}`);
  }
  const [executable, version] = probe.stdout.trim().split('\n');
  return { command, executable, version };
}

function lockOwner(lock) {
  try {
    return JSON.parse(readFileSync(join(lock, 'owner.json'), 'utf8'));
  } catch {
    return undefined;
  }
}

/** Whether a lock was left by a process that is gone (same host, dead pid) or is too old to be live. */
function lockIsStale(lock) {
  let age;
  try {
    age = Date.now() - statSync(lock).mtimeMs;
  } catch {
    return false;
  }
  if (age > LOCK_STALE_MS) return true;
  const owner = lockOwner(lock);
  if (!owner) return age > 10_000;
  if (owner.host !== hostname()) return false;
  try {
    process.kill(owner.pid, 0);
    return false;
  } catch (error) {
    return error.code === 'ESRCH';
  }
}

/** Takes the lock, waiting while a live process holds it; returns false when `venv` appeared meanwhile. */
async function acquire(lock, venv, log) {
  let told = false;
  for (;;) {
    if (existsSync(join(venv, 'bin', 'python'))) return false;
    try {
      mkdirSync(lock);
      writeFileSync(join(lock, 'owner.json'), JSON.stringify({ pid: process.pid, host: hostname() }));
      return true;
    } catch (error) {
      if (error.code !== 'EEXIST') throw error;
    }
    if (lockIsStale(lock)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    if (!told) log(`waiting for another process that is making ${venv}`);
    told = true;
    await sleep(500);
  }
}

async function makeVenv(base, venv, log) {
  // Under the lock: what another try left half made (killed meanwhile) goes.
  for (const entry of readdirSync(dirname(venv))) {
    if (entry.startsWith(`${basename(venv)}.tmp-`)) rmSync(join(dirname(venv), entry), { recursive: true, force: true });
  }
  const building = mkdtempSync(`${venv}.tmp-`);
  try {
    log(`making the Python tools' virtualenv (${base.command} ${base.version.split(' ')[0]}, test/python-requirements.txt) in ${venv}: first use only`);
    const made = await run(base.command, ['-m', 'venv', building]);
    if (made.code !== 0) throw new Error(`${base.command} -m venv failed (${INSTALL_HINT}):\n${made.output}`);
    const pip = await run(join(building, 'bin', 'python'), [
      '-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--no-compile', '--no-input', '-r', REQUIREMENTS,
    ]);
    if (pip.code !== 0) throw new Error(`pip install -r test/python-requirements.txt failed:\n${pip.output.trim().split('\n').slice(-30).join('\n')}`);
    // The bytecode is compiled here (pip's would name the temporary paths in tracebacks and in what
    // inspect reads, which hypothesis does), naming the final paths: each schemathesis start would
    // compile its thousands of modules again where PYTHONDONTWRITEBYTECODE is set.
    const compiled = await run(join(building, 'bin', 'python'), ['-m', 'compileall', '-q', '-s', building, '-p', venv, join(building, 'lib')]);
    if (compiled.code !== 0) throw new Error(`python -m compileall failed:\n${compiled.output.trim().split('\n').slice(-30).join('\n')}`);
    try {
      renameSync(building, venv);
    } catch (error) {
      if (error.code !== 'EEXIST' && error.code !== 'ENOTEMPTY') throw error;
    }
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
}

/**
 * The virtualenv's python, and how to run schemathesis with it (`[python, '-m', 'schemathesis.cli']`),
 * making the virtualenv first when it does not exist. Fails with what to install when python3 or its
 * venv module is missing, or with pip's own words.
 */
export async function ensurePythonTools({ log = (line) => console.error(`nova-gateway tests: ${line}`) } = {}) {
  const base = basePython();
  const requirements = readFileSync(REQUIREMENTS);
  const key = createHash('sha256').update(requirements).update('\0').update(base.executable).update('\0').update(base.version).digest('hex').slice(0, 16);
  const venv = join(cacheDir(), `venv-${key}`);
  const python = join(venv, 'bin', 'python');
  if (!existsSync(python)) {
    mkdirSync(cacheDir(), { recursive: true });
    const lock = `${venv}.lock`;
    if (await acquire(lock, venv, log)) {
      try {
        if (!existsSync(python)) await makeVenv(base, venv, log);
      } finally {
        rmSync(lock, { recursive: true, force: true });
      }
    }
  }
  return { venv, python, schemathesis: [python, '-m', 'schemathesis.cli'] };
}

let memo;
/** ensurePythonTools, once per process. */
export function pythonTools() {
  memo ??= ensurePythonTools();
  return memo;
}

// `node scripts/python-tools.mjs`: makes the virtualenv when missing and prints the tools' versions.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const tools = await ensurePythonTools();
    const versions = spawnSync(tools.python, ['-c', 'import importlib.metadata as m; print(*(f"{p} {m.version(p)}" for p in ("schemathesis", "openai", "anthropic")), sep=", ")'], {
      encoding: 'utf8',
    });
    if (versions.status !== 0) throw new Error(`the virtualenv ${tools.venv} does not import its tools:\n${versions.stderr}`);
    console.log(`${tools.venv}: ${versions.stdout.trim()}`);
  } catch (error) {
    console.error(`nova-gateway: ${error.message}`);
    process.exitCode = 1;
  }
}
