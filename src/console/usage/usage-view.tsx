import { useCallback, useId, useMemo, useState } from 'react';
import type { ConsoleApi } from '../api/client.js';
import type { GroupBy } from '../api/types.js';
import { ErrorMessage, Loading } from '../components/error-message.js';
import { useLoad } from '../components/use-load.js';
import { UsageCards } from './usage-cards.js';
import { UsageChart } from './usage-chart.js';
import { MEASURES, toSeries, type Measure } from './usage-series.js';
import { UsageTable } from './usage-table.js';
import { usageQuery, WINDOWS, type WindowId } from './usage-windows.js';

/** A project's usage over a chosen window: headline numbers, a stacked chart and the same numbers as a table. */
export function UsageView({ api, projectId, allowGroupByKey }: { api: ConsoleApi; projectId: string; allowGroupByKey: boolean }) {
  const [windowId, setWindowId] = useState<WindowId>('24h');
  const [groupBy, setGroupBy] = useState<GroupBy>('model');
  const [measure, setMeasure] = useState<Measure>('requests');
  const [now, setNow] = useState(() => Date.now());
  const ids = useId();
  // The window is fixed when it is chosen (or refreshed), so the chart and the table show one answer.
  const query = useMemo(() => usageQuery(windowId, groupBy, now), [windowId, groupBy, now]);
  const load = useCallback(() => api.usage(projectId, query), [api, projectId, query]);
  const usage = useLoad(load);
  const series = useMemo(() => (usage.data ? toSeries(usage.data, groupBy, measure) : null), [usage.data, groupBy, measure]);

  return (
    <section className="usage" aria-label="Usage" data-start-time={query.start_time} data-end-time={query.end_time} data-bucket-width={query.bucket_width}>
      <div className="controls">
        <div className="field">
          <label htmlFor={`${ids}-window`}>Window</label>
          <select id={`${ids}-window`} value={windowId} onChange={(event) => {
              setWindowId(event.target.value as WindowId);
              setNow(Date.now());
            }}>
            {WINDOWS.map((window) => (
              <option key={window.id} value={window.id}>
                Last {window.label} (per {window.bucket === '1m' ? 'minute' : window.bucket === '1h' ? 'hour' : 'day'})
              </option>
            ))}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${ids}-measure`}>Measure</label>
          <select id={`${ids}-measure`} value={measure} onChange={(event) => setMeasure(event.target.value as Measure)}>
            {MEASURES.map((option) => (
              <option key={option.id} value={option.id}>
                {option.label}
              </option>
            ))}
          </select>
        </div>
        {allowGroupByKey && (
          <div className="field">
            <label htmlFor={`${ids}-group`}>Stacked by</label>
            <select id={`${ids}-group`} value={groupBy} onChange={(event) => setGroupBy(event.target.value as GroupBy)}>
              <option value="model">Model</option>
              <option value="api_key">API key</option>
            </select>
          </div>
        )}
        <button type="button" onClick={() => setNow(Date.now())}>
          Refresh
        </button>
      </div>
      {usage.error && <ErrorMessage error={usage.error} what="the usage" />}
      {usage.loading && !usage.data && <Loading what="usage" />}
      {usage.data && series && (
        <>
          <UsageCards usage={usage.data} />
          <UsageChart series={series} measure={measure} groupLabel={groupBy === 'model' ? 'model' : 'API key'} />
          <UsageTable usage={usage.data} groupBy={groupBy} />
        </>
      )}
    </section>
  );
}
