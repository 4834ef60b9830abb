import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';

const ROOT = new URL('../../', import.meta.url).pathname;
const run = promisify(execFile);

/** `npm run bench` in miniature (one-second measures, two rounds, four connections), with `env` on top. */
function benchInMiniature(env: Record<string, string>, timeoutMs: number) {
  return run(process.execPath, ['--import', 'tsx', 'bench/run.ts'], {
    cwd: ROOT,
    env: { ...process.env, BENCH_SECONDS: '1', BENCH_ROUNDS: '2', BENCH_WARM_UP_SECONDS: '1', BENCH_CONNECTIONS: '4', ...env },
    timeout: timeoutMs,
  });
}

interface Figure {
  rps: number;
  rounds: number[];
  requests: number;
  errors: number;
  cpu_us_per_request?: number;
  core_halts_per_request?: number;
  load_core_halts_per_request?: number;
}

/**
 * `npm run bench` end to end in miniature (every target, part and mode, one-second measures,
 * 200 short held streams, then 200 requests through a model that queues most of them), so the harness cannot rot between the runs that produce the README's
 * figures. It checks that every measure ran without a failed request and that the summary is
 * computed from them; it asserts no speed (figures belong to the benchmark, not to a test).
 */
describe('npm run bench (smoke)', () => {
  const resultDirs: string[] = [];
  const resultsDir = () => {
    const dir = mkdtempSync(join(tmpdir(), 'nova-bench-smoke-'));
    resultDirs.push(dir);
    return dir;
  };
  afterEach(() => {
    for (const dir of resultDirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });

  it('measures every target with wrk, holds streams through the gateway and writes one JSON', { timeout: 300_000 }, async () => {
    const results = resultsDir();
    const { stdout } = await benchInMiniature(
      {
        BENCH_HELD_STREAMS: '200',
        BENCH_HELD_INTERVAL_MS: '50',
        BENCH_HELD_EVENTS: '5',
        BENCH_PROBES: '10',
        // The queued model's two targets take 10 each: most of the 200 wait in its queue.
        BENCH_HELD_MAX_CONCURRENT: '10',
        BENCH_RESULTS: results,
      },
      290_000,
    );
    expect(stdout).toMatch(/\| nova, every feature on +\|/);
    const [file] = readdirSync(results);
    const report = JSON.parse(readFileSync(join(results, file!), 'utf8')) as {
      targets: Record<string, { json?: Figure; stream?: Figure; one_connection?: Figure }>;
      held_streams: { streams: number; completed: number; failed: number; rss_peak_mb: number; rss_per_held_kb: number };
      held_streams_queued: {
        streams: number;
        failed: number;
        upstream_in_flight_while_held: number;
        queued_while_held: number;
        queue_depth_after: number;
        rss_per_held_kb: number;
        heap_per_held_kb: number;
      };
      against_targets: Record<string, number | null>;
      round_ratios: Record<string, number[]>;
      machine: { cpuidle_driver: string | null; guest_halt_poll_ns: number | null };
      tracing_sink: { export_requests: number; spans: number; undecoded: number; gateway_requests: number; in_flight_at_stops: number; chat_server_spans: number };
    };
    // The idle policy is recorded as this machine has it (null where the kernel has none).
    const haltPoll = (() => {
      try {
        return Number(readFileSync('/sys/module/haltpoll/parameters/guest_halt_poll_ns', 'utf8'));
      } catch {
        return null;
      }
    })();
    expect(report.machine.guest_halt_poll_ns).toBe(haltPoll);
    const haltsShown = !stdout.includes('running unpinned') && existsSync('/sys/devices/system/cpu/cpu1/cpuidle/state0/usage');
    expect(stdout).toContain(`guest_halt_poll_ns: ${haltPoll ?? 'none'}`);
    const expected = [
      'upstream',
      'bare',
      'nova',
      'nova_store',
      'nova_get',
      'nova_messages',
      'nova_messages_native',
      'nova_key',
      'nova_fleet',
      'nova_traced',
      ...(stdout.includes('nginx is not installed') ? [] : ['nginx']),
    ];
    expect(Object.keys(report.targets).sort()).toEqual(expected.sort());
    // These targets are measured for throughput only (bench/run.ts, noLatency).
    const throughputOnly = ['nova_messages', 'nova_messages_native', 'nova_key', 'nova_fleet', 'nova_traced'];
    for (const [key, figure] of Object.entries(report.targets)) {
      const measures =
        key === 'nova_get' ? [figure.json] : throughputOnly.includes(key) ? [figure.json, figure.stream] : [figure.json, figure.stream, figure.one_connection];
      for (const measure of measures) {
        expect(measure, key).toBeDefined();
        expect(measure!.requests, key).toBeGreaterThan(0);
        expect(measure!.rounds, key).toHaveLength(2);
        expect(measure!.errors, key).toBe(0);
        if (key !== 'upstream') expect(measure!.cpu_us_per_request, key).toBeGreaterThan(0);
        // The pinned core's halts are counted where the kernel shows its idle states.
        if (key !== 'upstream' && haltsShown) {
          expect(measure!.core_halts_per_request, key).toBeGreaterThanOrEqual(0);
          expect(measure!.load_core_halts_per_request, key).toBeGreaterThanOrEqual(0);
        }
      }
    }
    expect(report.held_streams).toMatchObject({ streams: 200, completed: 200, failed: 0 });
    expect(report.held_streams.rss_peak_mb).toBeGreaterThan(0);
    expect(report.held_streams.rss_per_held_kb).toEqual(expect.any(Number));
    // Through the queued model: every request streamed or waited (the gateway had no more than
    // 2 x 10 at the targets at once), none failed, and the queue was empty once their clients left.
    const queued = report.held_streams_queued;
    expect(queued).toMatchObject({ streams: 200, failed: 0, queue_depth_after: 0 });
    expect(queued.upstream_in_flight_while_held).toBeGreaterThan(0);
    expect(queued.upstream_in_flight_while_held).toBeLessThanOrEqual(20);
    expect(queued.queued_while_held).toBeGreaterThan(0);
    expect(queued.rss_per_held_kb).toEqual(expect.any(Number));
    expect(queued.heap_per_held_kb).toEqual(expect.any(Number));
    for (const value of Object.values(report.against_targets)) expect(value).not.toBeNull();
    // The traced gateway's spans reached the OTLP sink (bench/otlp-sink.ts), every export decoded:
    // one server span per chat request (those wrk left in flight at its stops included), fewer only
    // where the batch processor dropped some.
    const sink = report.tracing_sink;
    expect(sink.export_requests).toBeGreaterThan(0);
    expect(sink.undecoded).toBe(0);
    expect(sink.gateway_requests).toBeGreaterThan(0);
    expect(sink.chat_server_spans).toBeGreaterThan(0);
    expect(sink.chat_server_spans).toBeLessThanOrEqual(sink.gateway_requests + sink.in_flight_at_stops);
    const sameRound = ['messages_vs_chat', 'native_vs_chat', 'key_vs_project', 'fleet_vs_single', 'traced_vs_untraced'].flatMap((name) => [
      `${name}_json`,
      `${name}_stream`,
      `cpu_${name}_json`,
      `cpu_${name}_stream`,
    ]);
    for (const ratio of sameRound) {
      expect(report.against_targets[ratio], ratio).toBeGreaterThan(0);
      expect(report.round_ratios[ratio], ratio).toHaveLength(2);
    }
  });

  it('measures a second gateway, started with its own Node flags, in the same rounds (A/B)', { timeout: 120_000 }, async () => {
    const results = resultsDir();
    const marker = join(results, 'gateway-b-imported');
    // A module imported by gateway B's own flag (two of them, spaces between) leaves a file: the flags reached its Node.
    const flags = `--max-semi-space-size=8  --import=data:text/javascript,import{writeFileSync}from"node:fs";writeFileSync(process.env.NOVA_BENCH_MARKER,"")`;
    const { stdout } = await benchInMiniature(
      { BENCH_TARGETS: 'nova,nova_b', BENCH_MODES: 'json', BENCH_PARTS: 'throughput', BENCH_B_NODE_ARGS: flags, NOVA_BENCH_MARKER: marker, BENCH_RESULTS: results },
      110_000,
    );
    expect(existsSync(marker)).toBe(true);
    expect(stdout).toContain('| nova B (--max-semi-space-size=8  --import=data:');
    const file = readdirSync(results).find((name) => name.endsWith('.json'));
    const report = JSON.parse(readFileSync(join(results, file!), 'utf8')) as {
      targets: Record<string, { json?: Figure }>;
      against_targets: Record<string, number | null>;
    };
    expect(Object.keys(report.targets).sort()).toEqual(['nova', 'nova_b']);
    expect(report.targets.nova_b!.json!.rounds).toHaveLength(2);
    expect(report.targets.nova_b!.json!.errors).toBe(0);
    expect(report.against_targets.b_vs_nova_json).toBeGreaterThan(0);
  });

  it('gives the second gateway its Node flags: one Node refuses fails the run at once', { timeout: 120_000 }, async () => {
    const failed = await benchInMiniature({ BENCH_TARGETS: 'nova_b', BENCH_PARTS: 'throughput', BENCH_B_NODE_ARGS: '--no-such-node-flag' }, 110_000).then(
      () => null,
      (error: Error & { stderr: string }) => error,
    );
    expect(failed).not.toBeNull();
    expect(failed!.stderr).toContain('--no-such-node-flag');
    expect(failed!.stderr).toMatch(/the gateway exited \(code \d+\) before it was ready/);
  });
});
