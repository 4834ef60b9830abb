import type { Session } from '../api/types.js';

export type ConsoleScope = 'keys:read' | 'keys:write' | 'usage:read' | 'project:write';

/** The admin (scopes null) may do everything; a key what its scopes allow. */
export const can = (session: Session, scope: ConsoleScope): boolean => session.scopes === null || session.scopes.includes(scope);
