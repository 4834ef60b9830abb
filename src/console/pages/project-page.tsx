import { useCallback, useState } from 'react';
import type { ConsoleApi } from '../api/client.js';
import type { Session } from '../api/types.js';
import { Empty, ErrorMessage, Loading } from '../components/error-message.js';
import { useLoad } from '../components/use-load.js';
import { KeysPanel } from '../project/keys-panel.js';
import { SettingsPanel } from '../project/settings-panel.js';
import { WebhooksPanel } from '../project/webhooks-panel.js';
import { hrefs, PROJECT_TABS, type ProjectTab } from '../routing/routes.js';
import { can } from '../session/scopes.js';
import { UsageView } from '../usage/usage-view.js';

const TAB_LABELS: Record<ProjectTab, string> = { settings: 'Settings', keys: 'Keys', usage: 'Usage', webhooks: 'Webhooks' };

export function ProjectPage({ api, session, projectId, tab }: { api: ConsoleApi; session: Session; projectId: string; tab: ProjectTab }) {
  // A key sees its own project only; the server refuses the rest too (403), this says it first in words.
  if (session.role === 'key' && projectId !== session.project_id) {
    return (
      <>
        <h1>Project not available</h1>
        <div className="message message-error" role="alert">
          This session belongs to project <span className="mono">{session.project_id}</span>: it cannot see project <span className="mono">{projectId}</span>.{' '}
          <a href={hrefs.project(session.project_id!)}>Go to your project</a>.
        </div>
      </>
    );
  }
  return <OwnProjectPage api={api} session={session} projectId={projectId} tab={tab} />;
}

function OwnProjectPage({ api, session, projectId, tab }: { api: ConsoleApi; session: Session; projectId: string; tab: ProjectTab }) {
  const load = useCallback(() => api.getProject(projectId), [api, projectId]);
  const project = useLoad(load);
  // Kept here: a save changes updated_at, which remounts the panel (its fields then show what was stored).
  const [saved, setSaved] = useState(false);
  const onSaved = () => {
    setSaved(true);
    project.reload();
  };
  return (
    <>
      <h1>{project.data ? `Project “${project.data.name}”` : 'Project'}</h1>
      <p className="mono sub">{projectId}</p>
      <nav aria-label="Project sections" className="tabs">
        {PROJECT_TABS.map((name) => (
          <a key={name} href={hrefs.project(projectId, name)} aria-current={name === tab ? 'page' : undefined}>
            {TAB_LABELS[name]}
          </a>
        ))}
      </nav>
      {tab === 'settings' && (
        <>
          {project.error && <ErrorMessage error={project.error} what="this project" />}
          {project.loading && !project.data && <Loading what="the project" />}
          {project.data && <SettingsPanel key={project.data.updated_at} api={api} session={session} project={project.data} saved={saved} onSaved={onSaved} />}
        </>
      )}
      {tab === 'keys' && <KeysPanel api={api} session={session} projectId={projectId} />}
      {tab === 'usage' &&
        (can(session, 'usage:read') ? (
          <section aria-labelledby="usage-title">
            <h2 id="usage-title">Usage</h2>
            <UsageView api={api} projectId={projectId} allowGroupByKey />
          </section>
        ) : (
          <Empty>This key has no usage:read scope, so it cannot show usage.</Empty>
        ))}
      {tab === 'webhooks' && <WebhooksPanel api={api} session={session} projectId={projectId} />}
    </>
  );
}
