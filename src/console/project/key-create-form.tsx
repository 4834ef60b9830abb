import { useState } from 'react';
import type { ConsoleApi } from '../api/client.js';
import type { KeyBudgets, KeyCreateBody, KeyRateLimits, NewApiKey, Session } from '../api/types.js';
import { ErrorMessage } from '../components/error-message.js';
import { NumberField, numberOrNull } from '../components/number-field.js';

/** The scopes a key can hold (src/auth/key-access.ts). */
export const ALL_SCOPES = ['model', 'usage:read', 'keys:read', 'keys:write', 'project:write', 'conversations:read'];

const RATE_FIELDS: { field: keyof KeyRateLimits; label: string }[] = [
  { field: 'requests_per_minute', label: 'Requests per minute' },
  { field: 'burst_limit', label: 'Burst limit' },
  { field: 'tokens_per_minute', label: 'Tokens per minute' },
  { field: 'max_concurrent_requests', label: 'Concurrent requests' },
];
const BUDGET_FIELDS: { field: keyof KeyBudgets; label: string; step?: string }[] = [
  { field: 'daily_tokens', label: 'Daily tokens' },
  { field: 'monthly_tokens', label: 'Monthly tokens' },
  { field: 'monthly_cost', label: 'Monthly cost (USD)', step: 'any' },
];

/** Only what was filled in: the server gives the rest its defaults (a key's: its creator's). */
function filled<Field extends string>(values: Record<string, string>, fields: { field: Field }[]): Partial<Record<Field, number | null>> | undefined {
  const given = fields.filter(({ field }) => (values[field] ?? '').trim() !== '');
  if (given.length === 0) return undefined;
  return Object.fromEntries(given.map(({ field }) => [field, numberOrNull(values[field]!)])) as Partial<Record<Field, number | null>>;
}

export function KeyCreateForm({ api, session, projectId, onCreated }: { api: ConsoleApi; session: Session; projectId: string; onCreated: (key: NewApiKey) => void }) {
  const offered = session.scopes ?? ALL_SCOPES;
  const [name, setName] = useState('');
  const [models, setModels] = useState('');
  const [scopes, setScopes] = useState<string[]>(offered);
  const [limits, setLimits] = useState<Record<string, string>>({});
  const [error, setError] = useState<Error | null>(null);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    const modelList = models
      .split(',')
      .map((model) => model.trim())
      .filter(Boolean);
    const body: KeyCreateBody = { name: name.trim(), scopes };
    if (modelList.length > 0) body.models = modelList;
    const rateLimits = filled(limits, RATE_FIELDS);
    const budgets = filled(limits, BUDGET_FIELDS);
    if (rateLimits) body.rate_limits = rateLimits;
    if (budgets) body.budgets = budgets;
    try {
      onCreated(await api.createKey(projectId, body));
      setName('');
      setModels('');
      setLimits({});
      setError(null);
    } catch (caught) {
      setError(caught as Error);
    }
  };

  const toggle = (scope: string, on: boolean) => setScopes((current) => (on ? [...current, scope] : current.filter((value) => value !== scope)));

  return (
    <form className="panel" onSubmit={submit} aria-labelledby="create-key-title">
      <h3 id="create-key-title">Create a key</h3>
      <div className="row wrap">
        <div className="field">
          <label htmlFor="key-name">Name</label>
          <input id="key-name" required maxLength={128} value={name} onChange={(event) => setName(event.target.value)} />
        </div>
        <div className="field grow">
          <label htmlFor="key-models">Models (comma-separated, * allowed; empty: {session.role === 'admin' ? 'every model' : "this key's own"})</label>
          <input id="key-models" value={models} onChange={(event) => setModels(event.target.value)} />
        </div>
      </div>
      <fieldset>
        <legend>Scopes</legend>
        <div className="row wrap">
          {offered.map((scope) => (
            <label key={scope} className="check">
              <input type="checkbox" checked={scopes.includes(scope)} onChange={(event) => toggle(scope, event.target.checked)} /> {scope}
            </label>
          ))}
        </div>
      </fieldset>
      <fieldset>
        <legend>Own limits and budgets (empty: {session.role === 'admin' ? 'none' : "this key's own"}; the project's still apply)</legend>
        <div className="grid">
          {[...RATE_FIELDS, ...BUDGET_FIELDS].map(({ field, label, ...rest }) => (
            <NumberField
              key={field}
              id={`key-${field}`}
              label={label}
              step={'step' in rest ? (rest.step as string) : undefined}
              value={limits[field] ?? ''}
              onChange={(value) => setLimits({ ...limits, [field]: value })}
            />
          ))}
        </div>
      </fieldset>
      {error && <ErrorMessage error={error} />}
      <button type="submit" className="primary" disabled={name.trim() === ''}>
        Create key
      </button>
    </form>
  );
}
