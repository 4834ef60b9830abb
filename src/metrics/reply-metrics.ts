import { Counter, Gauge, type Registry } from 'prom-client';

/** Replies held for clients that do not read them (src/http/slow-readers.ts). */
export class ReplyMetrics {
  readonly bufferedBytes: Gauge;
  readonly slowReadersDropped: Counter<'reason'>;

  constructor(registry: Registry) {
    this.bufferedBytes = new Gauge({
      name: 'nova_reply_buffered_bytes',
      help: 'Reply bytes this replica holds for clients that have not taken them yet (the connections\' pending writes), as of the last check.',
      registers: [registry],
    });
    this.slowReadersDropped = new Counter({
      name: 'nova_slow_readers_dropped_total',
      help: 'Client connections dropped for not reading their replies, by reason: write_timeout (no byte taken for server.write_timeout_ms), buffer_pressure (the slowest readers while the replica held more than server.max_buffered_reply_bytes).',
      labelNames: ['reason'],
      registers: [registry],
    });
  }
}
