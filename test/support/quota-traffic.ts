import type { FastifyInstance } from 'fastify';
import type { LightMyRequestResponse } from 'fastify';
import type { TestProject } from './test-app.js';

/** A cheap authenticated /v1 request (list the project's keys). */
export function hit(app: FastifyInstance, project: TestProject) {
  return app.inject({ url: `/v1/api-keys?project_id=${project.projectId}&limit=1`, headers: project.auth });
}

/** `n` concurrent requests, spread round-robin over the given apps (replicas). */
export async function burst(apps: FastifyInstance[], project: TestProject, n: number) {
  const responses = await Promise.all(Array.from({ length: n }, (_, i) => hit(apps[i % apps.length]!, project)));
  return tally(responses);
}

export function tally(responses: LightMyRequestResponse[]) {
  const admitted = responses.filter((response) => response.statusCode !== 429);
  const refused = responses.filter((response) => response.statusCode === 429);
  return { responses, admitted: admitted.length, refused: refused.length, statuses: [...new Set(responses.map((r) => r.statusCode))] };
}
