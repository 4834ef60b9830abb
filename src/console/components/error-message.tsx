import { ApiError } from '../api/http.js';

/** An error in words, with the server's own message; a 403 says the session may not see it. */
export function ErrorMessage({ error, what }: { error: Error; what?: string }) {
  const denied = error instanceof ApiError && error.status === 403;
  return (
    <div className="message message-error" role="alert">
      {what && <strong>{denied ? `You cannot see ${what}. ` : `Could not load ${what}. `}</strong>}
      {error.message}
    </div>
  );
}

export function Empty({ children }: { children: React.ReactNode }) {
  return <p className="message message-empty">{children}</p>;
}

export function Loading({ what }: { what: string }) {
  return (
    <p className="message" role="status">
      Loading {what}…
    </p>
  );
}
