import type { Session } from '../api/types.js';
import { hrefs, type Route } from '../routing/routes.js';

/** The frame of every signed-in page: a skip link, the navigation for the role, and sign-out. */
export function Layout({ session, route, onSignOut, children }: { session: Session; route: Route; onSignOut: () => void; children: React.ReactNode }) {
  const current = (page: Route['page'], projectId?: string) =>
    route.page === page && (projectId === undefined || (route.page === 'project' && route.projectId === projectId)) ? 'page' : undefined;
  return (
    <>
      <a className="skip" href="#main" onClick={(event) => { event.preventDefault(); document.getElementById('main')?.focus(); }}>
        Skip to content
      </a>
      <header className="top">
        <span className="brand">nova console</span>
        <nav aria-label="Main">
          <a href={hrefs.overview()} aria-current={current('overview')}>
            Overview
          </a>
          {session.role === 'admin' ? (
            <a href={hrefs.projects()} aria-current={current('projects')}>
              Projects
            </a>
          ) : (
            <a href={hrefs.project(session.project_id!)} aria-current={current('project', session.project_id!)}>
              My project
            </a>
          )}
        </nav>
        <span className="who">{session.role === 'admin' ? 'Admin' : `Key ${session.api_key_id ?? ''}`}</span>
        <button type="button" onClick={onSignOut}>
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </>
  );
}
