import type { Scope } from '../auth/key-access.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The scope a key needs for this /v1 route (src/auth/key-access.ts), declared in the route's own
     * options; null: open to every key of the project. A /v1 route without it does not register
     * (src/routes/v1.ts), so no route is open by omission.
     */
    scope?: Scope | null;
  }
}

export type RouteScope = Scope | null;
