import type { GroupBy, Usage } from '../api/types.js';
import { Empty } from '../components/error-message.js';
import { formatCost, formatCount, groupName, refusalsOf } from './usage-series.js';

/** The same numbers as the chart, per model or key, with the window's totals. */
export function UsageTable({ usage, groupBy }: { usage: Usage; groupBy: GroupBy }) {
  const groups = [...(usage.groups ?? [])].sort((a, b) => b.requests - a.requests);
  const heading = groupBy === 'model' ? 'Model' : 'API key';
  const totalRefusals = refusalsOf(usage);
  if (groups.length === 0) return <Empty>No usage recorded in this window.</Empty>;
  return (
    <div className="table-scroll" tabIndex={0} role="region" aria-label={`Usage by ${heading.toLowerCase()}, as a table`}>
      <table className="usage-table" data-total-requests={usage.requests}>
        <caption>Usage by {heading.toLowerCase()}</caption>
        <thead>
          <tr>
            <th scope="col">{heading}</th>
            <th scope="col">Requests</th>
            <th scope="col">Tokens</th>
            <th scope="col">Cost</th>
            <th scope="col">Refusals</th>
            <th scope="col">Errors</th>
          </tr>
        </thead>
        <tbody>
          {groups.map((group) => (
            <tr key={groupName(group, groupBy)}>
              <th scope="row" className="mono">
                {groupName(group, groupBy)}
              </th>
              <td>{formatCount(group.requests)}</td>
              <td>{formatCount(group.tokens.total)}</td>
              <td>{formatCost(group.cost)}</td>
              <td>{formatCount(refusalsOf(group).total)}</td>
              <td>{formatCount(group.errors ?? 0)}</td>
            </tr>
          ))}
        </tbody>
        <tfoot>
          <tr>
            <th scope="row">Total</th>
            <td data-testid="table-total-requests">{formatCount(usage.requests)}</td>
            <td>{formatCount(usage.tokens.total)}</td>
            <td>{formatCost(usage.cost)}</td>
            <td>{formatCount(totalRefusals.total)}</td>
            <td>{formatCount(usage.errors ?? 0)}</td>
          </tr>
        </tfoot>
      </table>
    </div>
  );
}
