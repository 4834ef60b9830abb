import type { GatewayConfig } from '../config/gateway-config.js';
import type { Store } from '../store/types.js';
import { AlertEvents } from './alert-events.js';
import { DeliveryWorker } from './delivery-worker.js';
import { scanExpiringKeys } from './expiry-scan.js';
import { WebhookTargets } from './webhook-targets.js';

export interface AlertsOptions {
  config: GatewayConfig;
  store: Store;
  now: () => number;
  env: NodeJS.ProcessEnv;
  onError: (error: unknown, what: string) => void;
}

/** Budget alerts and key-expiry notices of one replica: the event emitter, its delivery worker and the expiry scan. */
export class Alerts {
  readonly events: AlertEvents;
  readonly worker: DeliveryWorker;
  private scanTimer: NodeJS.Timeout | null = null;
  private scanning: Promise<unknown> | null = null;

  constructor(private readonly options: AlertsOptions) {
    const { config, store, now, env, onError } = options;
    const settings = config.alerts;
    this.events = new AlertEvents(store.alerts, now);
    this.worker = new DeliveryWorker({
      store: store.alerts,
      targets: new WebhookTargets(store.alerts, settings.webhooks, env),
      now,
      retryDelaysMs: settings.retry_delays_ms,
      timeoutMs: settings.delivery_timeout_ms,
      concurrency: settings.delivery_concurrency,
      pollIntervalMs: settings.poll_interval_ms,
      claimTimeoutMs: settings.claim_timeout_ms,
      onError,
    });
  }

  start(): this {
    this.worker.start();
    this.scanTimer = setInterval(() => void this.scanExpiring(), this.options.config.alerts.expiry_scan_interval_ms);
    this.scanTimer.unref();
    return this;
  }

  /** One scan for keys about to expire; a scan still running is not started twice. */
  scanExpiring(): Promise<unknown> {
    this.scanning ??= scanExpiringKeys(this.options.store, this.events, this.options.now())
      .catch((error: unknown) => this.options.onError(error, 'expiring-key scan'))
      .finally(() => (this.scanning = null));
    return this.scanning;
  }

  async close(): Promise<void> {
    if (this.scanTimer) clearInterval(this.scanTimer);
    await this.scanning;
    await this.worker.close();
  }
}
