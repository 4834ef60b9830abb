/**
 * The bench's upstream: the test suite's FakeUpstream in a process of its own, so it does not
 * share a CPU with the load generator. Prints {"port": n} when listening.
 *
 * Scenarios: `fixed` (the latency before the answer; 8 chunks when streaming, back to back) and
 * `held` (1 chunk every 250 ms for 5 s: long-lived streams for the memory measurement).
 */
import { FakeUpstream } from '../test/support/fake-upstream.js';

const latencyMs = Number(process.env.UPSTREAM_LATENCY_MS ?? 10);
const chunks = Array.from({ length: 8 }, (_, n) => (n === 0 ? 'Token' : ` token${n}`));

const upstream = await FakeUpstream.start({
  fixed: { latencyMs, chunks },
  held: { latencyMs, chunks: Array.from({ length: 20 }, (_, n) => ` t${n}`), chunkDelayMs: 250 },
});
upstream.record = false;
process.stdout.write(`${JSON.stringify({ port: upstream.port })}\n`);
process.on('SIGTERM', () => void upstream.close().then(() => process.exit(0)));
