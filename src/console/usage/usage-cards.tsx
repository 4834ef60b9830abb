import type { Usage } from '../api/types.js';
import { formatCost, formatCount, refusalsOf } from './usage-series.js';

/** The window's headline numbers: request rate, tokens, cost, refusals by limit and errors. */
export function UsageCards({ usage }: { usage: Usage }) {
  const minutes = Math.max(1, (Date.parse(usage.end_time) - Date.parse(usage.start_time)) / 60_000);
  const refusals = refusalsOf(usage);
  const rate = usage.requests / minutes;
  return (
    <dl className="cards">
      <div className="card">
        <dt>Requests</dt>
        <dd>{formatCount(usage.requests)}</dd>
        <dd className="sub">{rate < 0.1 && rate > 0 ? rate.toFixed(3) : rate.toFixed(1)} per minute</dd>
      </div>
      <div className="card">
        <dt>Tokens</dt>
        <dd>{formatCount(usage.tokens.total)}</dd>
        <dd className="sub">
          {formatCount(usage.tokens.prompt)} in, {formatCount(usage.tokens.completion)} out
        </dd>
      </div>
      <div className="card">
        <dt>Cost</dt>
        <dd>{formatCost(usage.cost)}</dd>
      </div>
      <div className="card">
        <dt>Refusals</dt>
        <dd>{formatCount(refusals.total)}</dd>
        <dd className="sub">
          requests {refusals.requests}, tokens {refusals.tokens}, concurrency {refusals.concurrency}, budget {refusals.budget}
        </dd>
      </div>
      <div className="card">
        <dt>Errors</dt>
        <dd>{formatCount(usage.errors ?? 0)}</dd>
      </div>
    </dl>
  );
}
