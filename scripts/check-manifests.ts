/**
 * Validates Kubernetes manifests rendered by `helm template` from helm/nova-gateway.
 *
 *   npx tsx scripts/check-manifests.ts <render>...
 *
 * Each argument is one render: a multi-document YAML file, or a directory whose *.yaml / *.yml
 * files (recursively, e.g. `helm template --output-dir`) together form one render. For every
 * object it runs the kubernetes-models schema validation (a structural check for the
 * ServiceMonitor CRD), an unknown-field check of the hand-written pod templates, and the chart's
 * invariants (probes, hardening, shutdown timing, replicas vs HPA, Service/container ports,
 * config checksum, ...). Prints every check; exits 1 on any violation, 2 on bad usage.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { Ingress, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { checkKnownFields } from './manifest-checks/known-fields.js';
import { checkRender } from './manifest-checks/render-checks.js';
import { describe, isRecord, Report, type K8sObject, type Render } from './manifest-checks/report.js';

type ModelClass = new (data: never) => { validate(): void };

/** The kinds the chart may render, by apiVersion/kind; anything else is a violation. */
const MODELS: Record<string, ModelClass | 'structural'> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Pod': Pod,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'networking.k8s.io/v1/Ingress': Ingress,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'monitoring.coreos.com/v1/ServiceMonitor': 'structural',
  // Its expressions are checked against the gateway's metric names by scripts/check-metric-names.ts.
  'monitoring.coreos.com/v1/PrometheusRule': 'structural',
};

function yamlFiles(path: string): string[] {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => {
      const child = join(path, entry.name);
      if (entry.isDirectory()) return yamlFiles(child);
      return /\.ya?ml$/.test(entry.name) ? [child] : [];
    });
}

/** Parses a render; YAML errors and documents that are not Kubernetes objects become failures. */
function load(path: string, report: Report): Render {
  const objects: K8sObject[] = [];
  for (const file of yamlFiles(path)) {
    parseAllDocuments(readFileSync(file, 'utf8')).forEach((doc, index) => {
      const where = `${basename(file)} document ${index + 1}`;
      if (doc.errors.length > 0) {
        report.fail(where, `is valid YAML: ${doc.errors.map((e) => e.message).join('; ')}`);
        return;
      }
      const value: unknown = doc.toJS();
      if (value === null || value === undefined) return;
      if (isRecord(value) && typeof value.apiVersion === 'string' && typeof value.kind === 'string' && isRecord(value.metadata)) {
        objects.push(value as K8sObject);
      } else {
        report.fail(where, 'is a Kubernetes object (apiVersion, kind, metadata)');
      }
    });
  }
  return { label: report.label, objects };
}

function validateObject(report: Report, obj: K8sObject): void {
  const subject = describe(obj);
  const model = MODELS[`${obj.apiVersion}/${obj.kind}`];
  report.expect(typeof obj.metadata.name === 'string' && obj.metadata.name.length > 0, subject, 'metadata.name set');
  if (model === undefined) {
    report.fail(subject, `${obj.apiVersion} ${obj.kind} is a kind this check knows (add it to MODELS)`);
    return;
  }
  if (model !== 'structural') {
    let error = '';
    try {
      new model(obj as never).validate();
    } catch (err) {
      error = err instanceof Error ? err.message : String(err);
    }
    report.expect(error === '', subject, `valid ${obj.apiVersion} ${obj.kind} (kubernetes-models)`, error);
  }
  checkKnownFields(report, subject, obj.kind, obj);
}

function checkDuplicates(report: Report, render: Render): void {
  const seen = new Set<string>();
  const duplicates: string[] = [];
  for (const obj of render.objects) {
    const key = `${obj.kind}/${obj.metadata.namespace ?? ''}/${obj.metadata.name ?? ''}`;
    if (seen.has(key)) duplicates.push(key);
    seen.add(key);
  }
  report.expect(duplicates.length === 0, 'render', 'no two objects share kind, namespace and name', duplicates.join(', '));
}

function main(paths: string[]): number {
  if (paths.length === 0) {
    console.error('usage: npx tsx scripts/check-manifests.ts <rendered.yaml | dir>...');
    return 2;
  }
  const failed: string[] = [];
  let checks = 0;
  for (const path of paths) {
    const report = new Report(basename(path));
    console.log(`== ${path}`);
    const render = load(path, report);
    report.expect(render.objects.length > 0, 'render', 'has objects', `${render.objects.length}`);
    console.log(`   ${render.objects.length} objects: ${render.objects.map(describe).join(', ')}`);
    for (const obj of render.objects) validateObject(report, obj);
    checkDuplicates(report, render);
    checkRender(report, render);
    checks += report.count;
    failed.push(...report.failed.map((line) => `${report.label}: ${line}`));
  }
  if (failed.length > 0) {
    console.error(`\ncheck-manifests: ${failed.length} of ${checks} checks FAILED:`);
    for (const line of failed) console.error(`  - ${line}`);
    return 1;
  }
  console.log(`\ncheck-manifests: all ${checks} checks passed on ${paths.length} render(s)`);
  return 0;
}

process.exitCode = main(process.argv.slice(2));
