import { useMemo } from 'react';
import { apiFor } from './api/client.js';
import type { Session } from './api/types.js';
import { Empty } from './components/error-message.js';
import { Layout } from './components/layout.js';
import { OverviewPage } from './pages/overview-page.js';
import { ProjectPage } from './pages/project-page.js';
import { ProjectsPage } from './pages/projects-page.js';
import { SignInPage } from './pages/sign-in-page.js';
import { hrefs, type Route } from './routing/routes.js';
import { useHashRoute } from './routing/use-hash-route.js';
import { useSession } from './session/use-session.js';

export function App() {
  const { state, signIn, signOut } = useSession();
  const route = useHashRoute();
  if (state.status === 'loading') {
    return (
      <p className="message" role="status">
        Loading…
      </p>
    );
  }
  if (state.status === 'signed-out') return <SignInPage signIn={signIn} reason={state.reason} />;
  // Keyed by the session: a new sign-in starts from nothing, and a sign-out unmounts everything.
  return <SignedIn key={state.session.csrf_token} session={state.session} route={route} onSignOut={signOut} />;
}

function SignedIn({ session, route, onSignOut }: { session: Session; route: Route; onSignOut: () => void }) {
  const api = useMemo(() => apiFor(session.role), [session.role]);
  return (
    <Layout session={session} route={route} onSignOut={onSignOut}>
      <Page api={api} session={session} route={route} />
    </Layout>
  );
}

function Page({ api, session, route }: { api: ReturnType<typeof apiFor>; session: Session; route: Route }) {
  switch (route.page) {
    case 'overview':
      return <OverviewPage api={api} session={session} />;
    case 'projects':
      if (session.role !== 'admin') {
        return (
          <>
            <h1>Projects</h1>
            <div className="message message-error" role="alert">
              Only operators (signed in with the admin token) see the list of projects. This key sees its own project: <a href={hrefs.project(session.project_id!)}>open it</a>.
            </div>
          </>
        );
      }
      return <ProjectsPage api={api} />;
    case 'project':
      return <ProjectPage key={route.projectId} api={api} session={session} projectId={route.projectId} tab={route.tab} />;
    case 'not-found':
      return (
        <>
          <h1>Page not found</h1>
          <Empty>
            There is no page at “{route.path}”. <a href={hrefs.overview()}>Go to the overview</a>.
          </Empty>
        </>
      );
  }
}
