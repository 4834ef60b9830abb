/**
 * Which /v1 routes draw on a project's model policy (DESIGN.md section 7): the routes that
 * create model work. Every other /v1 route is management traffic (keys, projects, rate limits,
 * usage, conversations, records, models, responses retrieval) and has its own per-project limit,
 * so a project at its model limit can still read its usage and change its policy.
 */
const MODEL_ROUTES = new Set([
  'POST /v1/chat/completions',
  'POST /v1/completions',
  'POST /v1/embeddings',
  'POST /v1/responses',
  'POST /v1/images/generations',
  'POST /v1/audio/speech',
  'POST /v1/audio/transcriptions',
  'POST /v1/fine_tuning/jobs',
]);

export type RouteKind = 'model' | 'management';

/** `routeUrl` is the route's pattern (request.routeOptions.url), not the request's path. */
export function routeKindOf(method: string, routeUrl: string | undefined): RouteKind {
  return routeUrl !== undefined && MODEL_ROUTES.has(`${method} ${routeUrl}`) ? 'model' : 'management';
}
