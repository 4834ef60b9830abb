import type { ApiKey } from '../api/types.js';

const limitsText = (limits: Record<string, number | null>) =>
  Object.entries(limits)
    .filter(([, value]) => value !== null)
    .map(([field, value]) => `${field.replaceAll('_', ' ')} ${value}`)
    .join(', ') || 'none';

/** A project's keys with their policy; actions only for a session that may write keys. */
export function KeyList({ keys, canWrite, onRotate, onRevoke }: { keys: ApiKey[]; canWrite: boolean; onRotate: (key: ApiKey) => void; onRevoke: (key: ApiKey) => void }) {
  return (
    <div className="table-scroll" tabIndex={0} role="region" aria-label="API keys">
      <table>
        <caption className="visually-hidden">API keys ({keys.length})</caption>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Key</th>
            <th scope="col">Scopes</th>
            <th scope="col">Models</th>
            <th scope="col">Limits and budgets</th>
            <th scope="col">Last used</th>
            {canWrite && (
              <th scope="col">
                <span className="visually-hidden">Actions</span>
              </th>
            )}
          </tr>
        </thead>
        <tbody>
          {keys.map((key) => (
            <tr key={key.id} data-key-id={key.id}>
              <th scope="row">{key.name}</th>
              <td className="mono">
                {key.redacted_value}
                <br />
                <span className="sub">{key.id}</span>
              </td>
              <td>{key.scopes.join(', ') || 'none'}</td>
              <td>{key.models === null ? 'every model' : key.models.join(', ') || 'none'}</td>
              <td>
                {limitsText({ ...key.rate_limits })}; budgets: {limitsText({ ...key.budgets })}
              </td>
              <td>{key.last_used_at ? new Date(key.last_used_at).toLocaleString() : 'never'}</td>
              {canWrite && (
                <td className="actions">
                  <button type="button" onClick={() => onRotate(key)} aria-label={`Rotate key ${key.name}`}>
                    Rotate
                  </button>
                  <button type="button" className="danger" onClick={() => onRevoke(key)} aria-label={`Revoke key ${key.name}`}>
                    Revoke
                  </button>
                </td>
              )}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
