import { useCallback, useState } from 'react';
import { allPages, type ConsoleApi } from '../api/client.js';
import type { ApiKey, NewApiKey, Session } from '../api/types.js';
import { ConfirmDialog } from '../components/confirm-dialog.js';
import { Empty, ErrorMessage, Loading } from '../components/error-message.js';
import { SecretOnce } from '../components/secret-once.js';
import { useLoad } from '../components/use-load.js';
import { can } from '../session/scopes.js';
import { KeyCreateForm } from './key-create-form.js';
import { KeyList } from './key-list.js';
import { RotateDialog } from './rotate-dialog.js';

/** A project's keys: create (secret shown once), rotate with a grace period, revoke. */
export function KeysPanel({ api, session, projectId }: { api: ConsoleApi; session: Session; projectId: string }) {
  const load = useCallback(() => allPages<ApiKey>((cursor) => api.listKeys(projectId, cursor)), [api, projectId]);
  const keys = useLoad(load);
  const [secret, setSecret] = useState<NewApiKey | null>(null);
  const [rotating, setRotating] = useState<ApiKey | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const [error, setError] = useState<Error | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const canWrite = can(session, 'keys:write');

  if (!can(session, 'keys:read')) return <Empty>This key has no keys:read scope, so it cannot list the project's keys.</Empty>;

  const act = async (action: () => Promise<void>) => {
    try {
      await action();
      setError(null);
    } catch (caught) {
      setError(caught as Error);
    }
    keys.reload();
  };

  const revoke = (key: ApiKey) =>
    act(async () => {
      setRevoking(null);
      await api.revokeKey(projectId, key.id);
      setStatus(`Key “${key.name}” revoked: it no longer works.`);
    });

  const rotate = (key: ApiKey, grace: number) =>
    act(async () => {
      setRotating(null);
      const rotated = await api.rotateKey(projectId, key.id, grace);
      setSecret(rotated);
      setStatus(grace > 0 ? `Key “${key.name}” rotated: its old secret works until ${new Date(rotated.previous_secret_expires_at ?? Date.now()).toLocaleString()}.` : `Key “${key.name}” rotated: its old secret no longer works.`);
    });

  return (
    <section aria-labelledby="keys-title">
      <h2 id="keys-title">API keys</h2>
      {canWrite ? (
        <KeyCreateForm
          api={api}
          session={session}
          projectId={projectId}
          onCreated={(key) => {
            setSecret(key);
            setStatus(null);
            keys.reload();
          }}
        />
      ) : (
        <p className="help">This key has no keys:write scope: it can list keys but not change them.</p>
      )}
      {secret && <SecretOnce name={secret.name} secret={secret.secret} onDone={() => setSecret(null)} />}
      {status && <p role="status">{status}</p>}
      {error && <ErrorMessage error={error} />}
      {keys.error && <ErrorMessage error={keys.error} what="the keys" />}
      {keys.loading && !keys.data && <Loading what="keys" />}
      {keys.data && keys.data.length === 0 && <Empty>This project has no live keys.</Empty>}
      {keys.data && keys.data.length > 0 && <KeyList keys={keys.data} canWrite={canWrite} onRotate={setRotating} onRevoke={setRevoking} />}
      {revoking && (
        <ConfirmDialog
          title={`Revoke key “${revoking.name}”?`}
          body={<p>Every request with it is refused from now on, on every replica. This cannot be undone.</p>}
          confirmLabel="Revoke key"
          onConfirm={() => revoke(revoking)}
          onCancel={() => setRevoking(null)}
        />
      )}
      {rotating && <RotateDialog apiKey={rotating} onRotate={(grace) => rotate(rotating, grace)} onCancel={() => setRotating(null)} />}
    </section>
  );
}
