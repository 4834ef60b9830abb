import type { FastifyInstance } from 'fastify';
import type { LightMyRequestResponse } from 'fastify';
import type { TestProject } from './test-app.js';

/** The body of a cheap model request (the built-in echo model answers it in process). */
export const ECHO_CHAT = { model: 'echo-1', messages: [{ role: 'user', content: 'hi' }] };

/** A cheap authenticated model request: it draws on the project's model policy. */
export function hit(app: FastifyInstance, project: TestProject, body: Record<string, unknown> = ECHO_CHAT) {
  return app.inject({ method: 'POST', url: '/v1/chat/completions', headers: project.auth, payload: body });
}

/** A cheap management request (list the project's keys): it never draws on the model policy. */
export function manage(app: FastifyInstance, project: TestProject) {
  return app.inject({ url: `/v1/api-keys?project_id=${project.projectId}&limit=1`, headers: project.auth });
}

/** `n` concurrent requests, spread round-robin over the given apps (replicas). */
export async function burst(apps: FastifyInstance[], project: TestProject, n: number, body: Record<string, unknown> = ECHO_CHAT) {
  const responses = await Promise.all(Array.from({ length: n }, (_, i) => hit(apps[i % apps.length]!, project, body)));
  return tally(responses);
}

export function tally(responses: LightMyRequestResponse[]) {
  const admitted = responses.filter((response) => response.statusCode !== 429);
  const refused = responses.filter((response) => response.statusCode === 429);
  return { responses, admitted: admitted.length, refused: refused.length, statuses: [...new Set(responses.map((r) => r.statusCode))] };
}
