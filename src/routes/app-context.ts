import type { Authenticator } from '../auth/authenticator.js';
import type { FailedAttempts } from '../auth/failed-attempts.js';
import type { GatewayConfig } from '../config/gateway-config.js';
import type { Metrics } from '../metrics/metrics.js';
import type { Admission } from '../quota/admission.js';
import type { ManagementLimit } from '../quota/management-limit.js';
import type { QuotaReservation } from '../quota/quota-reservation.js';
import type { Charge, RequestCharges } from '../quota/request-charge.js';
import type { UsageMeter } from '../quota/usage-meter.js';
import type { Priority, Store } from '../store/types.js';
import type { AuthenticatedKey } from '../auth/key-access.js';
import type { ModelCallContext } from '../model-call/model-call-context.js';
import type { Alerts } from '../alerts/alerts.js';
import type { ConsoleSessions } from '../auth/console-session.js';

/** Drain state: set by the process on SIGTERM, read by hooks and probes. */
export interface Lifecycle {
  draining: boolean;
  inFlight: number;
}

/** What route plugins are given: the app's dependencies, built once by buildApp. */
export interface AppContext extends ModelCallContext {
  config: GatewayConfig;
  store: Store;
  authenticator: Authenticator;
  /** Failed-credential allowance per client address, shared by API keys and the admin token. */
  failedAttempts: FailedAttempts;
  adminToken: string | undefined;
  now: () => number;
  lifecycle: Lifecycle;
  usage: UsageMeter;
  metrics: Metrics;
  /** Per-project rate limiting (src/quota/admission.ts). */
  admission: Admission;
  /** Per-project limit of management routes (src/quota/management-limit.ts). */
  managementLimit: ManagementLimit;
  /** What a model request reserves at admission (src/quota/request-charge.ts). */
  charges: RequestCharges;
  /** Budget alerts and key-expiry notices: `alerts.events.emit` and the delivery worker (src/alerts/). */
  alerts: Alerts;
  /** The web console's sessions (src/auth/console-session.ts); null when `console.enabled` is false. */
  sessions: ConsoleSessions | null;
}

declare module 'fastify' {
  interface FastifyRequest {
    principal: AuthenticatedKey | null;
    /** What an admitted model request holds of its project's quota, until settled. */
    reservation: QuotaReservation | null;
    /** What an admitted model request was charged at admission: what it is charged when its usage cannot be (src/model-call/model-call.ts). */
    charge: Charge | null;
    /** The project's queue priority, read by admission with its policy (null: none, normal). */
    projectPriority: Priority | null;
  }
}
