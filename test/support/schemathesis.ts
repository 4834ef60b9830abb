import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pythonTools } from '../../scripts/python-tools.mjs';

/** The parts of schemathesis's JSON run report a test asserts on. */
export interface FuzzReport {
  exit_code: number;
  complete: boolean;
  stop_reason: string;
  operations: { total: number; selected: number; tested: number; errored: number; skipped: number };
  test_cases: { generated: number; with_failures: number; unique_failures: number; errored: number };
  failures: unknown[];
  errors: unknown[];
}

export interface FuzzRun {
  exitCode: number | null;
  report: FuzzReport;
  output: string;
}

export interface FuzzOptions {
  /** The gateway's base URL; the schema is read from `${url}/openapi.json`. */
  url: string;
  /** Sent on every request; passed through the environment, never on the command line. */
  authorization: string;
  /** Fixed path and query parameters (e.g. the project the key belongs to). */
  parameters?: Record<string, string>;
  /** `--include-path-regex` / `--exclude-path-regex` / `--include-method`. */
  includePath?: string;
  excludePath?: string;
  includeMethod?: string;
  maxExamples: number;
  seed: number;
  timeoutMs: number;
}

/**
 * How schemathesis is run: SCHEMATHESIS_BIN (a CLI of one's own) when set, else the tests'
 * virtualenv of test/python-requirements.txt, made on first use (scripts/python-tools.mjs).
 */
export async function schemathesisCommand(): Promise<[string, ...string[]]> {
  const own = process.env.SCHEMATHESIS_BIN;
  return own ? [own] : (await pythonTools()).schemathesis;
}

/**
 * Runs the schemathesis CLI against the live gateway with two checks: no server error
 * beyond the documented 502/503/504, and every response matching its own schema.
 */
export async function runSchemathesis(options: FuzzOptions): Promise<FuzzRun> {
  const command = await schemathesisCommand();
  const dir = mkdtempSync(join(tmpdir(), 'nova-fuzz-'));
  const configPath = join(dir, 'schemathesis.toml');
  const reportPath = join(dir, 'report.json');
  const parameters = Object.entries(options.parameters ?? {}).map(([name, value]) => `${JSON.stringify(name)} = ${JSON.stringify(value)}`);
  writeFileSync(
    configPath,
    [
      'headers = { Authorization = "${NOVA_FUZZ_AUTHORIZATION}" }',
      '[checks.not_a_server_error]',
      'expected-statuses = ["1XX", "2XX", "3XX", "4XX", "502", "503", "504"]',
      ...(parameters.length ? ['[parameters]', ...parameters] : []),
      '',
    ].join('\n'),
  );
  const args = [
    '--config-file', configPath,
    'run', `${options.url}/openapi.json`,
    '--checks', 'not_a_server_error,response_schema_conformance',
    '--max-examples', String(options.maxExamples),
    '--seed', String(options.seed),
    // One worker: with several threads, hypothesis's lambda descriptions race in ast.parse
    // on CPython 3.11 ("AST constructor recursion depth mismatch"), a runtime error of the tool.
    '--workers', '1',
    '--generation-database', 'none',
    '--no-color',
    '--report', 'json', '--report-json-path', reportPath,
    ...(options.includePath ? ['--include-path-regex', options.includePath] : []),
    ...(options.excludePath ? ['--exclude-path-regex', options.excludePath] : []),
    ...(options.includeMethod ? ['--include-method', options.includeMethod] : []),
  ];
  const [bin, ...prefix] = command;
  const child = spawn(bin, [...prefix, ...args], {
    cwd: dir,
    env: { ...process.env, NOVA_FUZZ_AUTHORIZATION: options.authorization },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const timer = setTimeout(() => child.kill('SIGKILL'), options.timeoutMs);
  const exitCode = await new Promise<number | null>((resolve, reject) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'ENOENT'
          ? new Error(`${bin} not found (SCHEMATHESIS_BIN, or the tests' virtualenv: see scripts/python-tools.mjs)`)
          : error,
      ),
    );
    child.once('exit', resolve);
  }).finally(() => clearTimeout(timer));
  let report: FuzzReport;
  try {
    report = JSON.parse(readFileSync(reportPath, 'utf8')) as FuzzReport;
  } catch {
    const why = exitCode === null ? `killed after ${options.timeoutMs} ms` : `exit ${exitCode}`;
    throw new Error(`schemathesis wrote no report (${why}):\n${output}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return { exitCode, report, output };
}
