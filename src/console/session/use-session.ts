import { useCallback, useEffect, useState } from 'react';
import { sessionApi } from '../api/client.js';
import { setCsrfToken, setUnauthorizedHandler } from '../api/http.js';
import type { Session } from '../api/types.js';

export type SessionState =
  | { status: 'loading' }
  | { status: 'signed-out'; reason: 'expired' | 'signed-out' | null }
  | { status: 'signed-in'; session: Session };

/**
 * The session lives in an HttpOnly cookie the page cannot read; the page holds only what
 * GET /console/session answers (the CSRF token in memory). Any 401 from an API call ends it.
 */
export function useSession() {
  const [state, setState] = useState<SessionState>({ status: 'loading' });

  const end = useCallback((reason: 'expired' | 'signed-out' | null) => {
    setCsrfToken(null);
    // Keep nothing of the ended session, not even the page it was on (a project id in the address).
    if (reason !== null) window.location.hash = '#/';
    setState({ status: 'signed-out', reason });
  }, []);

  const begin = useCallback((session: Session) => {
    setCsrfToken(session.csrf_token);
    setState({ status: 'signed-in', session });
  }, []);

  useEffect(() => {
    setUnauthorizedHandler(() => end('expired'));
    let live = true;
    sessionApi.current().then(
      (session) => live && begin(session),
      () => live && end(null),
    );
    return () => {
      live = false;
      setUnauthorizedHandler(null);
    };
  }, [begin, end]);

  const signIn = useCallback(async (token: string) => begin(await sessionApi.signIn(token)), [begin]);

  const signOut = useCallback(async () => {
    try {
      await sessionApi.signOut();
    } finally {
      end('signed-out');
    }
  }, [end]);

  return { state, signIn, signOut };
}
