import { useCallback, useMemo, useState } from 'react';
import { allPages, type ConsoleApi } from '../api/client.js';
import type { NewProject, Project } from '../api/types.js';
import { ConfirmDialog } from '../components/confirm-dialog.js';
import { Empty, ErrorMessage, Loading } from '../components/error-message.js';
import { SecretOnce } from '../components/secret-once.js';
import { useLoad } from '../components/use-load.js';
import { hrefs } from '../routing/routes.js';
import { ProjectCreateForm } from './project-create-form.js';

/** The admin's list of every project: search, create (its first key shown once) and delete. */
export function ProjectsPage({ api }: { api: ConsoleApi }) {
  const load = useCallback(() => allPages<Project>((cursor) => api.listProjects(cursor)), [api]);
  const projects = useLoad(load);
  const [search, setSearch] = useState('');
  const [created, setCreated] = useState<NewProject | null>(null);
  const [deleting, setDeleting] = useState<Project | null>(null);
  const [error, setError] = useState<Error | null>(null);

  const shown = useMemo(() => {
    const needle = search.trim().toLowerCase();
    return (projects.data ?? []).filter((project) => needle === '' || project.name.toLowerCase().includes(needle) || project.id.toLowerCase().includes(needle));
  }, [projects.data, search]);

  const confirmDelete = async () => {
    const project = deleting!;
    setDeleting(null);
    try {
      await api.deleteProject(project.id);
      setError(null);
      projects.reload();
    } catch (caught) {
      setError(caught as Error);
    }
  };

  return (
    <>
      <h1>Projects</h1>
      <ProjectCreateForm
        api={api}
        onCreated={(project) => {
          setCreated(project);
          projects.reload();
        }}
      />
      {created && <SecretOnce name={`${created.api_key.name}” of project “${created.name}`} secret={created.api_key.secret} onDone={() => setCreated(null)} />}
      <h2>All projects</h2>
      <div className="field">
        <label htmlFor="project-search">Search by name or id</label>
        <input id="project-search" type="search" value={search} onChange={(event) => setSearch(event.target.value)} />
      </div>
      {error && <ErrorMessage error={error} />}
      {projects.error && <ErrorMessage error={projects.error} what="the projects" />}
      {projects.loading && !projects.data && <Loading what="projects" />}
      {projects.data && projects.data.length === 0 && <Empty>No projects yet: create the first one above.</Empty>}
      {projects.data && projects.data.length > 0 && shown.length === 0 && <Empty>No project matches “{search}”.</Empty>}
      {shown.length > 0 && (
        <div className="table-scroll" tabIndex={0} role="region" aria-label="Projects">
          <table>
            <caption className="visually-hidden">Projects ({shown.length})</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Environment</th>
                <th scope="col">Created</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {shown.map((project) => (
                <tr key={project.id}>
                  <th scope="row">
                    <a href={hrefs.project(project.id)}>{project.name}</a>
                  </th>
                  <td className="mono">{project.id}</td>
                  <td>{project.environment ?? '—'}</td>
                  <td>{new Date(project.created_at).toLocaleString()}</td>
                  <td>
                    <button type="button" className="danger" onClick={() => setDeleting(project)} aria-label={`Delete project ${project.name}`}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {deleting && (
        <ConfirmDialog
          title={`Delete project “${deleting.name}”?`}
          body={<p>Its keys stop working at once and its settings are gone. This cannot be undone.</p>}
          confirmLabel="Delete project"
          onConfirm={confirmDelete}
          onCancel={() => setDeleting(null)}
        />
      )}
    </>
  );
}
