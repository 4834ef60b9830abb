/** Hash routes (`#/projects/<id>/keys`): the server serves only index.html and its assets. */

export const PROJECT_TABS = ['settings', 'keys', 'usage', 'webhooks'] as const;
export type ProjectTab = (typeof PROJECT_TABS)[number];

export type Route =
  | { page: 'overview' }
  | { page: 'projects' }
  | { page: 'project'; projectId: string; tab: ProjectTab }
  | { page: 'not-found'; path: string };

export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#/, '') || '/';
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts.length === 0 || (parts.length === 1 && parts[0] === 'overview')) return { page: 'overview' };
  if (parts[0] === 'projects' && parts.length === 1) return { page: 'projects' };
  if (parts[0] === 'projects' && parts.length <= 3) {
    const tab = (parts[2] ?? 'settings') as ProjectTab;
    if (PROJECT_TABS.includes(tab)) return { page: 'project', projectId: parts[1]!, tab };
  }
  return { page: 'not-found', path };
}

export const hrefs = {
  overview: () => '#/',
  projects: () => '#/projects',
  project: (projectId: string, tab: ProjectTab = 'settings') => `#/projects/${encodeURIComponent(projectId)}/${tab}`,
};
