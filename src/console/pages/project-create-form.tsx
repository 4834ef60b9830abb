import { useState } from 'react';
import type { ConsoleApi } from '../api/client.js';
import type { NewProject } from '../api/types.js';
import { ErrorMessage } from '../components/error-message.js';

export function ProjectCreateForm({ api, onCreated }: { api: ConsoleApi; onCreated: (project: NewProject) => void }) {
  const [name, setName] = useState('');
  const [environment, setEnvironment] = useState('');
  const [error, setError] = useState<Error | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    setBusy(true);
    try {
      const env = environment.trim();
      onCreated(await api.createProject({ name: name.trim(), ...(env ? { environment: env } : {}) }));
      setName('');
      setEnvironment('');
      setError(null);
    } catch (caught) {
      setError(caught as Error);
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="panel" onSubmit={submit} aria-labelledby="create-project-title">
      <h2 id="create-project-title">Create a project</h2>
      <div className="row wrap">
        <div className="field">
          <label htmlFor="project-name">Name</label>
          <input id="project-name" required maxLength={256} value={name} onChange={(event) => setName(event.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="project-environment">Environment (optional)</label>
          <input id="project-environment" maxLength={64} placeholder="production" value={environment} onChange={(event) => setEnvironment(event.target.value)} />
        </div>
      </div>
      {error && <ErrorMessage error={error} />}
      <button type="submit" className="primary" disabled={busy || name.trim() === ''}>
        Create project
      </button>
    </form>
  );
}
