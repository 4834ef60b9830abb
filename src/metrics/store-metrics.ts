import { Counter, Gauge, type Registry } from 'prom-client';
import type { StoreHealth } from '../store/store-health.js';

/** The store's reachability as this replica sees it (src/store/store-health.ts). */
export class StoreMetrics {
  readonly reachable: Gauge;
  readonly outages: Counter;

  constructor(registry: Registry) {
    this.reachable = new Gauge({
      name: 'nova_store_reachable',
      help: '1 while the store (Redis) answers this replica, 0 during an outage (from its first failure until a command succeeds again).',
      registers: [registry],
    });
    this.outages = new Counter({
      name: 'nova_store_outages_total',
      help: 'Store outages seen by this replica (each logged once, as one warn line).',
      registers: [registry],
    });
  }

  follow(health: StoreHealth): void {
    this.reachable.set(health.reachable ? 1 : 0);
    health.on('up', () => this.reachable.set(1));
    health.on('down', () => {
      this.reachable.set(0);
      this.outages.inc();
    });
  }
}
