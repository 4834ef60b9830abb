import type { FastifyRequest } from 'fastify';
import type { ModelWork } from '../core/operations.js';
import type { ModelCallContext } from './model-call-context.js';

/**
 * What a route that calls an upstream declares about itself, in its own options
 * (`config: { modelCall: … }`). Admission reads it: a route that creates model work draws on the
 * project's model policy and reserves its tokens; every other /v1 route is management traffic.
 */
export interface ModelCallFacts {
  /** 'model': creates model work (the model policy); 'stored': reads or changes what an upstream keeps (the management limit). */
  traffic: 'model' | 'stored';
  work: ModelWork;
  /**
   * The tokens of the stored history the upstream reads with this request (a conversation it
   * continues, a previous response): part of the reservation, read before admission.
   */
  historyTokens?: (ctx: ModelCallContext, projectId: string, body: unknown) => Promise<number>;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    modelCall?: ModelCallFacts;
  }
}

/** The facts of the route a model call runs in: a route that calls an upstream without declaring them is a bug, not a request. */
export function modelCallFactsOf(request: FastifyRequest): ModelCallFacts {
  const facts = request.routeOptions.config.modelCall;
  if (facts === undefined) throw new Error(`route ${request.method} ${request.routeOptions.url} calls an upstream without declaring config.modelCall`);
  return facts;
}
