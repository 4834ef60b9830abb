import { useState } from 'react';
import { ApiError } from '../api/http.js';

/** Exchanges the admin token or a project key for a session cookie; the token is sent once and never kept. */
export function SignInPage({ signIn, reason }: { signIn: (token: string) => Promise<void>; reason: 'expired' | 'signed-out' | null }) {
  const [token, setToken] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event: React.FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await signIn(token.trim());
    } catch (caught) {
      setError(messageOf(caught));
      setBusy(false);
    }
    // Signed in: this page unmounts; the token leaves memory with it.
  };

  return (
    <main className="sign-in" id="main">
      <h1>nova-gateway console</h1>
      {reason === 'expired' && (
        <p className="message" role="status">
          Your session has ended. Sign in again.
        </p>
      )}
      {reason === 'signed-out' && (
        <p className="message" role="status">
          You are signed out.
        </p>
      )}
      <form onSubmit={submit} aria-describedby="sign-in-help">
        <div className="field">
          <label htmlFor="token">Admin token or project API key</label>
          <input
            id="token"
            name="token"
            type="password"
            autoComplete="off"
            required
            value={token}
            onChange={(event) => setToken(event.target.value)}
            aria-invalid={error !== null}
            aria-describedby={error ? 'sign-in-error' : undefined}
          />
        </div>
        <p id="sign-in-help" className="help">
          The token is exchanged for a session of 12 hours; the browser never stores it.
        </p>
        {error && (
          <p id="sign-in-error" className="message message-error" role="alert">
            {error}
          </p>
        )}
        <button type="submit" className="primary" disabled={busy || token.trim() === ''}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
    </main>
  );
}

function messageOf(error: unknown): string {
  if (error instanceof ApiError && error.status === 429) return `Too many failed attempts: wait and try again. (${error.message})`;
  if (error instanceof ApiError && error.status === 401) return `Sign-in refused: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}
