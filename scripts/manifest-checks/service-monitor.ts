/**
 * Structural check of a Prometheus Operator ServiceMonitor (monitoring.coreos.com/v1), which
 * kubernetes-models does not model: known fields, a selector that picks one of the render's
 * Services, and endpoints that name a port of that Service.
 */
import type { IService } from 'kubernetes-models/v1';
import { describe, isRecord, selects, type K8sObject, type Report } from './report.js';

const SPEC_FIELDS = new Set([
  'attachMetadata', 'bodySizeLimit', 'endpoints', 'jobLabel', 'keepDroppedTargets', 'labelLimit',
  'labelNameLengthLimit', 'labelValueLengthLimit', 'namespaceSelector', 'podTargetLabels', 'sampleLimit',
  'scrapeClass', 'scrapeProtocols', 'selector', 'targetLabels', 'targetLimit', 'fallbackScrapeProtocol',
  'scrapeClassicHistograms', 'nativeHistogramBucketLimit', 'nativeHistogramMinBucketFactor',
  'convertClassicHistogramsToNHCB', 'selectorMechanism', 'serviceDiscoveryRole',
]);
const ENDPOINT_FIELDS = new Set([
  'authorization', 'basicAuth', 'bearerTokenFile', 'bearerTokenSecret', 'enableHttp2', 'filterRunning',
  'followRedirects', 'honorLabels', 'honorTimestamps', 'interval', 'metricRelabelings', 'noProxy', 'oauth2',
  'params', 'path', 'port', 'proxyConnectHeader', 'proxyFromEnvironment', 'proxyUrl', 'relabelings',
  'scheme', 'scrapeTimeout', 'targetPort', 'tlsConfig', 'trackTimestampsStaleness',
]);
const RELABEL_FIELDS = new Set(['action', 'modulus', 'regex', 'replacement', 'separator', 'sourceLabels', 'targetLabel']);
const DURATION = /^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$/;

function seconds(duration: string): number {
  const units: Record<string, number> = { y: 31_536_000, w: 604_800, d: 86_400, h: 3600, m: 60, s: 1, ms: 0.001 };
  let total = 0;
  for (const [, amount, unit] of duration.matchAll(/([0-9]+)(ms|y|w|d|h|m|s)/g)) {
    total += Number(amount) * (units[unit ?? 's'] ?? 0);
  }
  return total;
}

function unknownKeys(value: Record<string, unknown>, known: ReadonlySet<string>, path: string): string[] {
  return Object.keys(value).filter((key) => !known.has(key)).map((key) => `${path}.${key}`);
}

export function checkServiceMonitor(report: Report, sm: K8sObject, services: K8sObject[]): void {
  const subject = describe(sm);
  report.expect(sm.apiVersion === 'monitoring.coreos.com/v1', subject, 'apiVersion monitoring.coreos.com/v1');
  report.expect(Boolean(sm.metadata.name), subject, 'metadata.name set');
  const spec = sm.spec;
  if (!isRecord(spec)) {
    report.fail(subject, 'spec is an object');
    return;
  }

  const unknown = unknownKeys(spec, SPEC_FIELDS, 'spec');
  const selector = isRecord(spec.selector) ? spec.selector : {};
  const matchLabels = isRecord(selector.matchLabels) ? (selector.matchLabels as Record<string, string>) : undefined;
  const matched = services.filter((svc) => selects(matchLabels, svc.metadata.labels));
  report.expect(matched.length === 1, subject, 'spec.selector.matchLabels selects exactly one Service of the render',
    `selects ${matched.map(describe).join(', ') || 'none'}`);
  const service = matched[0] as (K8sObject & IService) | undefined;

  const namespaces = isRecord(spec.namespaceSelector) ? spec.namespaceSelector.matchNames : undefined;
  if (service && Array.isArray(namespaces)) {
    report.expect(namespaces.includes(service.metadata.namespace), subject,
      'spec.namespaceSelector.matchNames holds the Service namespace');
  }

  const endpoints = Array.isArray(spec.endpoints) ? spec.endpoints : [];
  report.expect(endpoints.length > 0, subject, 'spec.endpoints is a non-empty list');
  const portNames = new Set((service?.spec?.ports ?? []).map((port) => port.name));
  endpoints.forEach((endpoint: unknown, index) => {
    const at = `spec.endpoints[${index}]`;
    if (!isRecord(endpoint)) {
      report.fail(subject, `${at} is an object`);
      return;
    }
    unknown.push(...unknownKeys(endpoint, ENDPOINT_FIELDS, at));
    for (const list of ['relabelings', 'metricRelabelings'] as const) {
      const rules = endpoint[list];
      if (Array.isArray(rules)) {
        rules.forEach((rule: unknown, i) => {
          if (isRecord(rule)) unknown.push(...unknownKeys(rule, RELABEL_FIELDS, `${at}.${list}[${i}]`));
        });
      }
    }
    report.expect(typeof endpoint.port === 'string' && portNames.has(endpoint.port), subject,
      `${at}.port names a port of the Service`, `port ${String(endpoint.port)}, Service has ${[...portNames].join(', ')}`);
    report.expect(endpoint.path === undefined || (typeof endpoint.path === 'string' && endpoint.path.startsWith('/')),
      subject, `${at}.path is absolute`);
    const interval = endpoint.interval;
    const timeout = endpoint.scrapeTimeout;
    for (const [name, value] of [['interval', interval], ['scrapeTimeout', timeout]] as const) {
      if (value !== undefined) {
        report.expect(typeof value === 'string' && DURATION.test(value), subject, `${at}.${name} is a Prometheus duration`, String(value));
      }
    }
    if (typeof interval === 'string' && typeof timeout === 'string') {
      report.expect(seconds(timeout) <= seconds(interval), subject, `${at}.scrapeTimeout <= interval`, `${timeout} > ${interval}`);
    }
  });
  report.expect(unknown.length === 0, subject, 'no unknown fields', unknown.join(', '));
}
