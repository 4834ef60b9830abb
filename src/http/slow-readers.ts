import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { GatewayConfig } from '../config/gateway-config.js';

type Reason = 'write_timeout' | 'buffer_pressure';

/** What the check reports to (src/metrics/reply-metrics.ts fits it; http sits below metrics). */
export interface SlowReaderMetrics {
  slowReadersDropped: { inc(labels: { reason: Reason }): void };
  bufferedBytes: { set(bytes: number): void };
}

interface Watched {
  /** Bytes of this connection's completed writes so far. */
  delivered: number;
  /** The most bytes pending since its last completed write: what the client is given time to take. */
  pendingMax: number;
  /** When a write last completed, or nothing was pending. */
  progressAt: number;
}

/**
 * Bounds what clients that do not read can hold (DESIGN.md section 7, "Bounded before
 * authenticated"). Every connection is checked a few times per write timeout: its pending bytes
 * (`writableLength`: what Node holds for it beyond the kernel's buffer) are summed into the
 * buffered-bytes gauge, and a connection with bytes pending that has taken none for
 * `server.write_timeout_ms` is destroyed. Node's public API shows a write's progress only when it
 * completes (one 30 MB reply is one write), so a pending write is also given its bytes at
 * `server.write_min_bytes_per_second`. Its response's 'close' then releases what the request held
 * (src/routes/admission-hook.ts).
 *
 * Over `server.max_buffered_reply_bytes` the slowest readers are dropped first (those that have
 * gone longest without taking a byte, and none that took some since the last check) until the
 * replica is back under the bound. Refusing a new write instead would turn away a client that
 * reads, after its upstream call was made and paid for, while the memory stays with the clients
 * that caused the pressure. One warn line per episode (it ends after a write timeout without
 * pressure or drops), not one per connection.
 */
export function installSlowReaders(app: FastifyInstance, settings: GatewayConfig['server'], metrics: SlowReaderMetrics): void {
  const timeoutMs = settings.write_timeout_ms;
  const msPerByte = 1000 / settings.write_min_bytes_per_second;
  const maxBytes = settings.max_buffered_reply_bytes;
  const intervalMs = Math.max(50, Math.min(1000, Math.floor(timeoutMs / 10)));
  const watched = new Map<Socket, Watched>();

  app.server.on('connection', (socket: Socket) => {
    watched.set(socket, { delivered: 0, pendingMax: 0, progressAt: performance.now() });
    socket.once('close', () => watched.delete(socket));
  });

  type Episode = { startedAt: number; quietSince: number; dropped: Record<Reason, number>; peakBytes: number };
  let episode: Episode | null = null;
  /** Pressure seen now (a drop, or more buffered than the bound): the episode's one warn line when it starts. */
  const underPressure = (now: number, bufferedBytes: number, reason: Reason): Episode => {
    if (episode === null) {
      episode = { startedAt: now, quietSince: now, dropped: { write_timeout: 0, buffer_pressure: 0 }, peakBytes: 0 };
      app.log.warn(
        { reason, buffered_bytes: bufferedBytes, max_buffered_reply_bytes: maxBytes, write_timeout_ms: timeoutMs },
        'slow readers: dropping clients that do not read their replies',
      );
    }
    episode.quietSince = now;
    episode.peakBytes = Math.max(episode.peakBytes, bufferedBytes);
    return episode;
  };
  const drop = (socket: Socket, reason: Reason, now: number, bufferedBytes: number) => {
    watched.delete(socket);
    socket.destroy();
    metrics.slowReadersDropped.inc({ reason });
    underPressure(now, bufferedBytes, reason).dropped[reason]++;
  };

  const check = () => {
    const now = performance.now();
    let buffered = 0;
    const stalled: [Socket, Watched, number][] = [];
    for (const [socket, watch] of watched) {
      const pending = socket.writableLength;
      if (pending === 0) {
        watch.progressAt = now;
        watch.pendingMax = 0;
        continue;
      }
      // bytesWritten counts the pending bytes too: what is left are the writes that completed.
      const delivered = socket.bytesWritten - pending;
      if (delivered > watch.delivered) {
        watch.progressAt = now;
        watch.pendingMax = 0;
      }
      watch.delivered = delivered;
      watch.pendingMax = Math.max(watch.pendingMax, pending);
      if (now - watch.progressAt >= timeoutMs + watch.pendingMax * msPerByte) {
        drop(socket, 'write_timeout', now, buffered + pending);
        continue;
      }
      buffered += pending;
      if (now - watch.progressAt >= intervalMs) stalled.push([socket, watch, pending]);
    }
    if (buffered > maxBytes) {
      underPressure(now, buffered, 'buffer_pressure');
      stalled.sort(([, a], [, b]) => a.progressAt - b.progressAt);
      for (const [socket, , pending] of stalled) {
        if (buffered <= maxBytes) break;
        drop(socket, 'buffer_pressure', now, buffered);
        buffered -= pending;
      }
    }
    metrics.bufferedBytes.set(buffered);
    const current = episode as Episode | null;
    if (current !== null && now - current.quietSince >= timeoutMs) {
      app.log.info(
        { dropped: current.dropped, peak_buffered_bytes: current.peakBytes, duration_ms: Math.round(now - current.startedAt) },
        'slow readers: pressure over',
      );
      episode = null;
    }
  };
  const timer = setInterval(check, intervalMs).unref();
  app.addHook('onClose', async () => clearInterval(timer));
}
