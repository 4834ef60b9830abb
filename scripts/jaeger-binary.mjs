#!/usr/bin/env node
/* global process, console */
// The Jaeger v2 binary of the trace tests (test/support/jaeger.ts starts it; ../shared/DESIGN.md
// section 12: a real Jaeger, built from the Go module proxy), built from source with the machine's
// Go on first use and kept in the user's cache as jaeger-<version>/jaeger. `npm test` needs only Go
// (1.24.6 or newer, what jaeger's go.mod asks) and the module proxy.
// Plain JavaScript: .ci/run runs it (`node scripts/jaeger-binary.mjs`) before the tests, so that
// their timings have no Go build in them.
//
// `go install github.com/jaegertracing/jaeger/cmd/jaeger@<version>` is refused: jaeger's go.mod has
// a replace directive, which `go install pkg@version` does not accept. So the binary is built in a
// throwaway module that requires jaeger as a tool (`go get -tool`) and carries the same replace.
// The build happens in a temporary directory and the binary is renamed into place once it runs, so
// a file under the final name is always complete; two processes building at once only waste work
// (Go's build cache is shared and the last rename wins), so there is no lock.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cacheDir } from './python-tools.mjs';

export const JAEGER_VERSION = 'v1.76.0';
const JAEGER_MODULE = 'github.com/jaegertracing/jaeger';
const JAEGER_PACKAGE = `${JAEGER_MODULE}/cmd/jaeger`;
// The replace directives of jaeger's own go.mod at JAEGER_VERSION: without them the module graph
// would pick other versions than the ones jaeger is released and tested with.
const REPLACES = ['github.com/Shopify/sarama => github.com/Shopify/sarama v1.33.0'];
const INSTALL_HINT = 'put Go 1.24.6 or newer on the PATH (what jaeger\'s go.mod asks for), with access to its module proxy';

/** Where the binary is kept: <cache>/jaeger-<version>/jaeger, the cache being python-tools.mjs's. */
export function jaegerBinaryPath() {
  return join(cacheDir(), `jaeger-${JAEGER_VERSION}`, 'jaeger');
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

function lastLines(output, count = 30) {
  return output.trim().split('\n').slice(-count).join('\n');
}

/** `go version`, or a clear error when Go is missing. */
function goVersion() {
  const probe = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (probe.error) throw new Error(`The trace tests build Jaeger with Go, which was not found (${probe.error.message}): ${INSTALL_HINT}.`);
  if (probe.status !== 0) throw new Error(`\`go version\` failed: ${INSTALL_HINT}.\n${probe.stderr.trim()}`);
  return probe.stdout.trim();
}

async function build(binary, log) {
  const dir = join(binary, '..');
  mkdirSync(dir, { recursive: true });
  // What an earlier, killed build left half made goes (one still running only loses its work).
  for (const entry of readdirSync(dir)) {
    if (entry.startsWith('build.tmp-') && Date.now() - statSync(join(dir, entry)).mtimeMs > 60 * 60_000) {
      rmSync(join(dir, entry), { recursive: true, force: true });
    }
  }
  const building = mkdtempSync(join(dir, 'build.tmp-'));
  const started = Date.now();
  try {
    log(`building Jaeger ${JAEGER_VERSION} (${JAEGER_PACKAGE}) with ${goVersion()} into ${binary}: first use only: about 15 min of CPU, half an hour on a busy 2-core machine`);
    writeFileSync(join(building, 'go.mod'), `module nova-gateway/jaeger-build\n\ngo 1.24\n\n${REPLACES.map((line) => `replace ${line}\n`).join('')}`);
    // -mod=mod: the throwaway module has no go.sum until `go get` writes it. GOTOOLCHAIN=local: the
    // machine's Go builds it, never one fetched because jaeger's go.mod names a toolchain line.
    const env = { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local', GOWORK: 'off' };
    const got = await run('go', ['get', '-tool', `${JAEGER_PACKAGE}@${JAEGER_VERSION}`], { cwd: building, env });
    if (got.code !== 0) throw new Error(`go get -tool ${JAEGER_PACKAGE}@${JAEGER_VERSION} failed (${INSTALL_HINT}):\n${lastLines(got.output)}`);
    const output = join(building, 'jaeger');
    const built = await run('go', ['build', '-trimpath', '-ldflags=-s -w', '-o', output, JAEGER_PACKAGE], { cwd: building, env });
    if (built.code !== 0) throw new Error(`go build ${JAEGER_PACKAGE} failed:\n${lastLines(built.output)}`);
    const probe = await run(output, ['version']);
    if (probe.code !== 0) throw new Error(`the built ${basename(output)} does not run (\`jaeger version\`):\n${lastLines(probe.output)}`);
    renameSync(output, binary);
    log(`built Jaeger ${JAEGER_VERSION} in ${Math.round((Date.now() - started) / 1000)} s (${(statSync(binary).size / 2 ** 20).toFixed(0)} MiB)`);
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
}

/**
 * The path of the Jaeger v2 binary: $NOVA_JAEGER_BINARY when set (a jaeger built elsewhere), else
 * the cached build, made first when missing. Fails with what to install when Go is missing, or
 * with Go's own words.
 */
export async function ensureJaegerBinary({ log = (line) => console.error(`nova-gateway tests: ${line}`) } = {}) {
  if (process.env.NOVA_JAEGER_BINARY) {
    if (!existsSync(process.env.NOVA_JAEGER_BINARY)) throw new Error(`NOVA_JAEGER_BINARY names ${process.env.NOVA_JAEGER_BINARY}, which does not exist`);
    return process.env.NOVA_JAEGER_BINARY;
  }
  const binary = jaegerBinaryPath();
  if (!existsSync(binary)) await build(binary, log);
  return binary;
}

let memo;
/** ensureJaegerBinary, once per process. */
export function jaegerBinary() {
  memo ??= ensureJaegerBinary();
  return memo;
}

// `node scripts/jaeger-binary.mjs`: builds the binary when missing and prints its path.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  try {
    const binary = await ensureJaegerBinary();
    const version = spawnSync(binary, ['version'], { encoding: 'utf8' });
    if (version.status !== 0) throw new Error(`${binary} does not run:\n${version.stderr}`);
    console.error(`nova-gateway tests: Jaeger ${JAEGER_VERSION} at ${binary}`);
    console.log(binary);
  } catch (error) {
    console.error(`nova-gateway: ${error.message}`);
    process.exitCode = 1;
  }
}
