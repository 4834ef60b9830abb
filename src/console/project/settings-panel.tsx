import { useState } from 'react';
import type { ConsoleApi } from '../api/client.js';
import type { Priority, Project, Session } from '../api/types.js';
import { ErrorMessage } from '../components/error-message.js';
import { NumberField } from '../components/number-field.js';
import { can } from '../session/scopes.js';
import { POLICY_FIELDS, policyChanges, policyText, type PolicyText } from './policy-fields.js';

/**
 * A project's settings: the admin sets its policy, ceilings and priority; a key with project:write
 * its name, environment and rate limits (within the ceilings); anyone else reads them.
 */
export function SettingsPanel({ api, session, project, saved, onSaved }: { api: ConsoleApi; session: Session; project: Project; saved: boolean; onSaved: () => void }) {
  const admin = session.role === 'admin';
  const writer = !admin && can(session, 'project:write');
  const [name, setName] = useState(project.name);
  const [environment, setEnvironment] = useState(project.environment ?? '');
  const [policy, setPolicy] = useState(() => policyText(project.rate_limits));
  const [ceilings, setCeilings] = useState(() => policyText(project.ceilings));
  const [priority, setPriority] = useState<Priority | ''>(project.priority ?? '');
  const [error, setError] = useState<Error | null>(null);

  const save = async (event: React.FormEvent) => {
    event.preventDefault();
    try {
      if (writer && (name !== project.name || environment !== (project.environment ?? ''))) {
        await api.updateSettings(project.id, { name: name.trim(), environment: environment.trim() || null });
      }
      const changes = policyChanges(policyText(project.rate_limits), policy);
      const ceilingChanges = policyChanges(policyText(project.ceilings), ceilings);
      const patch = {
        ...changes,
        ...(admin && Object.keys(ceilingChanges).length > 0 ? { ceilings: ceilingChanges } : {}),
        ...(admin && priority !== (project.priority ?? '') ? { priority: priority === '' ? null : priority } : {}),
      };
      if (Object.keys(patch).length > 0) await api.updatePolicy(project.id, patch);
      setError(null);
      onSaved();
    } catch (caught) {
      setError(caught as Error);
    }
  };

  const editable = admin || writer;
  return (
    <form className="panel" onSubmit={save} aria-labelledby="settings-title">
      <h2 id="settings-title">Settings</h2>
      {!editable && <p className="help">This key has no project:write scope: the settings are read-only.</p>}
      <div className="row wrap">
        <div className="field">
          <label htmlFor="settings-name">Name</label>
          <input id="settings-name" value={name} disabled={!writer} onChange={(event) => setName(event.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="settings-environment">Environment</label>
          <input id="settings-environment" value={environment} disabled={!writer} onChange={(event) => setEnvironment(event.target.value)} />
        </div>
        <div className="field">
          <label htmlFor="settings-priority">Queue priority</label>
          <select id="settings-priority" value={priority} disabled={!admin} onChange={(event) => setPriority(event.target.value as Priority | '')}>
            <option value="">normal (default)</option>
            <option value="high">high</option>
            <option value="normal">normal</option>
            <option value="low">low</option>
          </select>
        </div>
      </div>
      {admin && <p className="help">Name and environment are changed with the project's own key (project:write).</p>}
      <PolicyFieldset legend="Rate limits and budgets (empty: none)" prefix="policy" values={policy} onChange={setPolicy} disabled={!editable} />
      <PolicyFieldset legend="Ceilings: the most the project's own keys may set (empty: none)" prefix="ceiling" values={ceilings} onChange={setCeilings} disabled={!admin} optional />
      {error && <ErrorMessage error={error} />}
      {saved && <p role="status">Saved.</p>}
      {editable && (
        <button type="submit" className="primary">
          Save settings
        </button>
      )}
    </form>
  );
}

function PolicyFieldset(props: { legend: string; prefix: string; values: PolicyText; onChange: (values: PolicyText) => void; disabled: boolean; optional?: boolean }) {
  return (
    <fieldset>
      <legend>{props.legend}</legend>
      <div className="grid">
        {POLICY_FIELDS.map(({ field, label, step }) => (
          <NumberField
            key={field}
            id={`${props.prefix}-${field}`}
            label={label}
            step={step}
            value={props.values[field]}
            disabled={props.disabled}
            onChange={(value) => props.onChange({ ...props.values, [field]: value })}
          />
        ))}
      </div>
    </fieldset>
  );
}
