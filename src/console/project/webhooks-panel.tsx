import { useCallback } from 'react';
import type { ConsoleApi } from '../api/client.js';
import type { Session } from '../api/types.js';
import { Empty, ErrorMessage, Loading } from '../components/error-message.js';
import { useLoad } from '../components/use-load.js';

/** Budget-alert webhooks and their recent deliveries (docs/alerts.md): the admin API only. */
export function WebhooksPanel({ api, session, projectId }: { api: ConsoleApi; session: Session; projectId: string }) {
  if (session.role !== 'admin') {
    return (
      <section aria-labelledby="webhooks-title">
        <h2 id="webhooks-title">Webhook deliveries</h2>
        <Empty>Webhooks and their deliveries are kept by the gateway's operators: sign in with the admin token to see them, or ask an operator.</Empty>
      </section>
    );
  }
  return <AdminWebhooks api={api} projectId={projectId} />;
}

function AdminWebhooks({ api, projectId }: { api: ConsoleApi; projectId: string }) {
  const loadHooks = useCallback(() => api.webhooks(projectId), [api, projectId]);
  const loadDeliveries = useCallback(() => api.webhookDeliveries(projectId), [api, projectId]);
  const hooks = useLoad(loadHooks);
  const deliveries = useLoad(loadDeliveries);
  return (
    <section aria-labelledby="webhooks-title">
      <h2 id="webhooks-title">Webhooks</h2>
      {hooks.error && <ErrorMessage error={hooks.error} what="the webhooks" />}
      {hooks.loading && !hooks.data && <Loading what="webhooks" />}
      {hooks.data && hooks.data.data.length === 0 && <Empty>No webhooks: budget alerts of this project are not sent anywhere.</Empty>}
      {hooks.data && hooks.data.data.length > 0 && (
        <ul>
          {hooks.data.data.map((hook) => (
            <li key={hook.id}>
              <span className="mono">{hook.url}</span> ({hook.format}; at {hook.thresholds.map((value) => `${Math.round(value * 100)}%`).join(', ')} of a budget)
            </li>
          ))}
        </ul>
      )}
      <h2>Recent deliveries</h2>
      {deliveries.error && <ErrorMessage error={deliveries.error} what="the deliveries" />}
      {deliveries.loading && !deliveries.data && <Loading what="deliveries" />}
      {deliveries.data && deliveries.data.data.length === 0 && <Empty>No webhook deliveries for this project yet.</Empty>}
      {deliveries.data && deliveries.data.data.length > 0 && (
        <div className="table-scroll" tabIndex={0} role="region" aria-label="Webhook deliveries">
          <table>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Status</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last answer</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {deliveries.data.data.map((delivery) => (
                <tr key={delivery.id}>
                  <th scope="row">{delivery.event_type}</th>
                  <td>{delivery.status}</td>
                  <td>{delivery.attempts}</td>
                  <td>{delivery.last_error ?? (delivery.last_status_code === null ? '—' : `HTTP ${delivery.last_status_code}`)}</td>
                  <td>{new Date(delivery.created_at).toLocaleString()}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
