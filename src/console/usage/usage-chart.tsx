import { Bar, BarChart, CartesianGrid, Legend, ResponsiveContainer, Tooltip, XAxis, YAxis } from 'recharts';
import { Empty } from '../components/error-message.js';
import { formatMeasure, MEASURES, type Measure, type Series } from './usage-series.js';

// Distinct hues at 3:1 or more against the white background (WCAG's non-text contrast).
const PALETTE = ['#1f5fbf', '#c2410c', '#15803d', '#7e22ce', '#b91c1c', '#0e7490', '#a16207', '#be185d'];

/** The stacked bars of one measure; the figure carries the plotted total for readers and tests. */
export function UsageChart({ series, measure, groupLabel }: { series: Series; measure: Measure; groupLabel: string }) {
  const label = MEASURES.find((candidate) => candidate.id === measure)!.label;
  const summary = `${label}: ${formatMeasure(series.total, measure)} in total, by ${groupLabel}, over ${series.rows.length} buckets.`;
  return (
    <figure className="chart" data-measure={measure} data-plotted-total={series.total} aria-label={`${label} chart`}>
      <figcaption className="chart-summary">{summary}</figcaption>
      {series.total === 0 ? (
        <Empty>No {label.toLowerCase()} in this window: nothing to chart.</Empty>
      ) : (
        // Recharts' accessibility layer: the chart takes focus and the arrow keys move its tooltip from bucket to bucket.
        <div className="chart-area">
          <ResponsiveContainer width="100%" height={280}>
            <BarChart data={series.rows} margin={{ top: 8, right: 8, bottom: 8, left: 8 }} accessibilityLayer title={`${label} per bucket, by ${groupLabel}`} desc={summary}>
              <CartesianGrid strokeDasharray="3 3" vertical={false} />
              <XAxis dataKey="label" tick={{ fontSize: 12 }} minTickGap={16} />
              <YAxis tick={{ fontSize: 12 }} width={64} tickFormatter={(value: number) => formatMeasure(value, measure)} />
              <Tooltip formatter={(value) => formatMeasure(Number(value), measure)} />
              <Legend />
              {series.groups.map((group, index) => (
                <Bar key={group} dataKey={group} stackId="usage" fill={PALETTE[index % PALETTE.length]} isAnimationActive={false} />
              ))}
            </BarChart>
          </ResponsiveContainer>
        </div>
      )}
    </figure>
  );
}
