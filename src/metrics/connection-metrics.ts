import { Counter, Gauge, type Registry } from 'prom-client';
import type { ConnectionEvents, ConnectionRefusal } from '../http/connection-guard.js';

const REASONS: ConnectionRefusal[] = ['per_address', 'total', 'fd', 'pipelining', 'slow_body'];

/** Connection pressure from src/http/connection-guard.ts: refusals by reason and open connections. */
export class ConnectionMetrics {
  readonly refused: Counter<'reason'>;
  readonly open: Gauge;
  readonly events: ConnectionEvents;
  private openNow: () => number = () => 0;

  constructor(registry: Registry) {
    this.refused = new Counter({
      name: 'nova_connections_refused_total',
      help: 'Connections closed by a bound: at accept (per_address, total, fd) or later (pipelining, slow_body).',
      labelNames: ['reason'],
      registers: [registry],
    });
    // Every reason shows as 0 from the start, so that rate() sees the first refusal.
    for (const reason of REASONS) this.refused.inc({ reason }, 0);
    const openNow = () => this.openNow();
    this.open = new Gauge({
      name: 'nova_connections_open',
      help: 'Client connections open on this replica.',
      registers: [registry],
      collect() {
        this.set(openNow());
      },
    });
    this.events = {
      refused: (reason) => this.refused.inc({ reason }),
      follow: (openConnections) => (this.openNow = openConnections),
    };
  }
}
