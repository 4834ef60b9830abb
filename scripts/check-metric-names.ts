/**
 * Every metric name the chart's Grafana dashboard and PrometheusRule use must be one the gateway
 * exports: a renamed metric otherwise leaves an empty panel or an alert that never fires.
 *
 *   npx tsx scripts/check-metric-names.ts <rendered.yaml>...
 *
 * The exported names come from the gateway's own registry (src/metrics, defaults included;
 * histograms add _bucket, _sum, _count). Expressions are read from PrometheusRule rules and from
 * the dashboards of ConfigMaps labelled grafana_dashboard. The renders together must hold a
 * dashboard and a rule set, each covering what the chart documents. Exits 1 on any violation.
 */
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { Metrics } from '../src/metrics/metrics.js';

/** Series Prometheus itself adds per target, not the gateway: `up` (scrape health). */
const PROMETHEUS_SERIES = new Set(['up']);

const KEYWORDS = new Set([
  'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset',
  'sum', 'min', 'max', 'avg', 'count', 'stddev', 'stdvar', 'topk', 'bottomk', 'quantile', 'count_values', 'group',
  'inf', 'nan', 'Inf', 'NaN',
]);

/** What the dashboard must show and the rules must alert on (README of the chart, "Dashboards and alerts"). */
const DASHBOARD_MUST_USE = [
  'nova_http_requests_total', // request rate, errors
  'nova_http_request_duration_seconds_bucket', // latency
  'nova_usage_tokens_total', // tokens
  'nova_rate_limit_refusals_total', // refusals
  'nova_usage_requests_total', // usage per project
  'nova_store_reachable', // Redis health
  'nova_redis_errors_total',
  'nova_rate_limit_fallback_active', // fallback state
];
const ALERTS = [
  'NovaGatewayStoreUnavailable',
  'NovaGatewayRateLimitFallbackActive',
  'NovaGatewayHighErrorRatio',
  'NovaGatewayHighLatencyP99',
  'NovaGatewayUsageBufferGrowing',
  'NovaGatewayReplicasDown',
];

export async function exportedSeries(): Promise<Set<string>> {
  const metrics = new Metrics();
  const names = new Set(PROMETHEUS_SERIES);
  for (const metric of await metrics.registry.getMetricsAsJSON()) {
    names.add(metric.name);
    if (String(metric.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(metric.name + suffix);
    if (String(metric.type) === 'summary') for (const suffix of ['_sum', '_count']) names.add(metric.name + suffix);
  }
  return names;
}

/** Metric names in a PromQL expression: identifiers that are not functions, keywords, labels or durations. */
export function metricNamesIn(expr: string): string[] {
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ');
  const names: string[] = [];
  for (const match of stripped.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*/g)) {
    const name = match[0];
    const before = stripped[match.index - 1] ?? ' ';
    if (/[0-9.]/.test(before)) continue; // 1e3, 5m
    if (stripped.slice(match.index + name.length).trimStart().startsWith('(')) continue; // a function
    if (!KEYWORDS.has(name)) names.push(name);
  }
  return names;
}

function exprsOf(value: unknown, found: string[] = []): string[] {
  if (Array.isArray(value)) value.forEach((item) => exprsOf(item, found));
  else if (value && typeof value === 'object') {
    for (const [key, child] of Object.entries(value)) {
      if (key === 'expr' && typeof child === 'string') found.push(child);
      else exprsOf(child, found);
    }
  }
  return found;
}

interface Source {
  where: string;
  exprs: string[];
  alerts?: string[];
}

function sourcesIn(file: string): { dashboards: Source[]; rules: Source[] } {
  const dashboards: Source[] = [];
  const rules: Source[] = [];
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    const obj = doc.toJS() as { kind?: string; metadata?: { name?: string; labels?: Record<string, string> }; data?: Record<string, string>; spec?: unknown } | null;
    if (!obj?.kind) continue;
    const where = `${file}: ${obj.kind} ${obj.metadata?.name}`;
    if (obj.kind === 'ConfigMap' && obj.metadata?.labels && 'grafana_dashboard' in obj.metadata.labels) {
      for (const [key, text] of Object.entries(obj.data ?? {})) dashboards.push({ where: `${where} ${key}`, exprs: exprsOf(JSON.parse(text)) });
    }
    if (obj.kind === 'PrometheusRule') {
      const groups = (obj.spec as { groups?: { rules?: { alert?: string; expr?: string }[] }[] }).groups ?? [];
      const all = groups.flatMap((group) => group.rules ?? []);
      rules.push({ where, exprs: all.map((rule) => String(rule.expr)), alerts: all.map((rule) => rule.alert ?? '') });
    }
  }
  return { dashboards, rules };
}

async function main(files: string[]): Promise<number> {
  if (files.length === 0) {
    console.error('usage: npx tsx scripts/check-metric-names.ts <rendered.yaml>...');
    return 2;
  }
  const exported = await exportedSeries();
  const failures: string[] = [];
  const dashboards: Source[] = [];
  const rules: Source[] = [];
  for (const file of files) {
    const found = sourcesIn(file);
    dashboards.push(...found.dashboards);
    rules.push(...found.rules);
  }
  for (const source of [...dashboards, ...rules]) {
    const used = new Set(source.exprs.flatMap(metricNamesIn));
    const unknown = [...used].filter((name) => !exported.has(name));
    if (unknown.length > 0) failures.push(`${source.where} uses metrics the gateway does not export: ${unknown.join(', ')}`);
    if (source.exprs.length === 0) failures.push(`${source.where} has no expressions`);
    console.log(`${unknown.length ? 'FAIL' : 'ok  '} ${source.where}: ${source.exprs.length} expressions, ${used.size} metric names`);
  }
  if (dashboards.length === 0) failures.push('no render holds a Grafana dashboard ConfigMap (grafanaDashboard.enabled in a ci/*.yaml)');
  if (rules.length === 0) failures.push('no render holds a PrometheusRule (prometheusRule.enabled in a ci/*.yaml)');
  for (const dashboard of dashboards) {
    const used = new Set(dashboard.exprs.flatMap(metricNamesIn));
    const missing = DASHBOARD_MUST_USE.filter((name) => !used.has(name));
    if (missing.length > 0) failures.push(`${dashboard.where} shows nothing of ${missing.join(', ')}`);
  }
  for (const rule of rules) {
    const missing = ALERTS.filter((alert) => !rule.alerts!.includes(alert));
    if (missing.length > 0) failures.push(`${rule.where} lacks the alerts ${missing.join(', ')}`);
  }
  if (failures.length > 0) {
    console.error(`\ncheck-metric-names: ${failures.length} FAILED:`);
    for (const line of failures) console.error(`  - ${line}`);
    return 1;
  }
  console.log(`\ncheck-metric-names: ${dashboards.length} dashboard(s) and ${rules.length} rule set(s) use only the ${exported.size} series the gateway exports`);
  return 0;
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].split('/').pop()!)) {
  process.exitCode = await main(process.argv.slice(2));
}
