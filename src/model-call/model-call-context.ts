import type { GatewayConfig } from '../config/gateway-config.js';
import type { Metrics } from '../metrics/metrics.js';
import type { UsageMeter } from '../quota/usage-meter.js';
import type { Store } from '../store/types.js';
import type { ModelRegistry } from './model-registry.js';
import type { Tracing } from '../tracing/tracing.js';

/** What a model call needs of the app: a subset of the routes' context, so that model-call knows nothing of routes. */
export interface ModelCallContext {
  config: GatewayConfig;
  store: Store;
  now: () => number;
  usage: UsageMeter;
  metrics: Metrics;
  /** Models of the config with their upstream targets and connection pools. */
  models: ModelRegistry;
  /** Spans of the model call and its upstream attempts (src/tracing/); null when tracing is off. */
  tracing: Tracing | null;
}
