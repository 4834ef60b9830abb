import { useCallback, useState } from 'react';
import { allPages, type ConsoleApi } from '../api/client.js';
import type { Project, Session } from '../api/types.js';
import { Empty, ErrorMessage, Loading } from '../components/error-message.js';
import { useLoad } from '../components/use-load.js';
import { hrefs } from '../routing/routes.js';
import { UsageView } from '../usage/usage-view.js';

/** Request rate, tokens, cost, refusals and errors per model, for one project: the admin picks it, a key has its own. */
export function OverviewPage({ api, session }: { api: ConsoleApi; session: Session }) {
  return (
    <>
      <h1>Overview</h1>
      {session.role === 'admin' ? <AdminOverview api={api} /> : <ProjectOverview api={api} projectId={session.project_id!} canRead={canReadUsage(session)} />}
    </>
  );
}

const canReadUsage = (session: Session) => session.scopes === null || session.scopes.includes('usage:read');

function AdminOverview({ api }: { api: ConsoleApi }) {
  const load = useCallback(() => allPages<Project>((cursor) => api.listProjects(cursor)), [api]);
  const projects = useLoad(load);
  const [chosen, setChosen] = useState<string | null>(null);
  if (projects.error) return <ErrorMessage error={projects.error} what="the projects" />;
  if (!projects.data) return <Loading what="projects" />;
  if (projects.data.length === 0) {
    return (
      <Empty>
        No projects yet. <a href={hrefs.projects()}>Create one on the Projects page</a>; its usage then shows here.
      </Empty>
    );
  }
  const projectId = chosen ?? projects.data[0]!.id;
  return (
    <>
      <div className="field">
        <label htmlFor="overview-project">Project</label>
        <select id="overview-project" value={projectId} onChange={(event) => setChosen(event.target.value)}>
          {projects.data.map((project) => (
            <option key={project.id} value={project.id}>
              {project.name} ({project.id})
            </option>
          ))}
        </select>
      </div>
      <ProjectOverview key={projectId} api={api} projectId={projectId} canRead />
    </>
  );
}

function ProjectOverview({ api, projectId, canRead }: { api: ConsoleApi; projectId: string; canRead: boolean }) {
  if (!canRead) return <Empty>This key has no usage:read scope, so it cannot show usage. Sign in with a key that has it.</Empty>;
  return (
    <>
      <p>
        Project <a href={hrefs.project(projectId)} className="mono">{projectId}</a>, per model.
      </p>
      <UsageView api={api} projectId={projectId} allowGroupByKey={false} />
    </>
  );
}
