/** Invariants across the objects of one render: the chart's contract with Kubernetes and the gateway. */
import { posix } from 'node:path';
import { parse } from 'yaml';
import type { IDeployment } from 'kubernetes-models/apps/v1';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import type { IIngress, INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1';
import type { IConfigMap, IContainer, IPod, IService, IVolume } from 'kubernetes-models/v1';
import { checkGatewayPod, checkHardening, HTTP_PORT, METRICS_PORT, resolvePort } from './pod-checks.js';
import { describe, isRecord, selects, type K8sObject, type Render, type Report } from './report.js';
import { checkServiceMonitor } from './service-monitor.js';

type Obj<T> = K8sObject & T;

function ofKind<T>(render: Render, kind: string): Obj<T>[] {
  return render.objects.filter((o) => o.kind === kind) as Obj<T>[];
}

function checkDeployment(report: Report, d: Obj<IDeployment>, render: Render): void {
  const subject = describe(d);
  const template = d.spec?.template;
  const pod = template?.spec;
  if (!pod) {
    report.fail(subject, 'has spec.template.spec');
    return;
  }
  const hpa = ofKind<IHorizontalPodAutoscaler>(render, 'HorizontalPodAutoscaler').find(
    (h) => h.spec?.scaleTargetRef.kind === 'Deployment' && h.spec.scaleTargetRef.name === d.metadata.name,
  );
  if (hpa) {
    report.expect(d.spec?.replicas === undefined, subject, `no spec.replicas (${describe(hpa)} scales it)`,
      `replicas: ${String(d.spec?.replicas)}`);
  } else {
    report.expect(typeof d.spec?.replicas === 'number', subject, 'spec.replicas set (no HPA)');
  }
  report.expect(selects(d.spec?.selector.matchLabels, template.metadata?.labels), subject,
    'spec.selector.matchLabels match the pod template labels');
  report.expect(/^[0-9a-f]{64}$/.test(template.metadata?.annotations?.['checksum/config'] ?? ''), subject,
    'pod template has the checksum/config annotation (config changes roll the pods)');
  const spread = pod.topologySpreadConstraints ?? [];
  report.expect(spread.length > 0 && spread.every((t) => selects(t.labelSelector?.matchLabels, template.metadata?.labels)),
    subject, 'topologySpreadConstraints present and select the pods');
  checkGatewayPod(report, subject, pod);
  checkConfigMount(report, subject, pod.containers, pod.volumes ?? [], render);
}

/** NOVA_CONFIG points at a file of a mounted ConfigMap of the render, and that file has models. */
function checkConfigMount(report: Report, subject: string, containers: IContainer[], volumes: IVolume[], render: Render): void {
  for (const c of containers) {
    const path = c.env?.find((e) => e.name === 'NOVA_CONFIG')?.value;
    const mount = c.volumeMounts?.find((m) => path?.startsWith(`${m.mountPath}/`));
    const configMapName = volumes.find((v) => v.name === mount?.name)?.configMap?.name;
    const cm = ofKind<IConfigMap>(render, 'ConfigMap').find((o) => o.metadata.name === configMapName);
    const key = path && mount ? posix.relative(mount.mountPath, path) : undefined;
    const text = key ? cm?.data?.[key] : undefined;
    let models: unknown;
    try {
      const doc: unknown = text === undefined ? undefined : parse(text);
      models = isRecord(doc) ? doc.models : undefined;
    } catch {
      models = undefined;
    }
    report.expect(Array.isArray(models) && models.length > 0, `${subject} container ${c.name}`,
      `NOVA_CONFIG (${String(path)}) is ${String(key)} of mounted ConfigMap ${String(configMapName)}, with models`);
  }
}

function podsOf(render: Render): { labels: Record<string, string>; containers: IContainer[] }[] {
  return ofKind<IDeployment>(render, 'Deployment').map((d) => ({
    labels: d.spec?.template.metadata?.labels ?? {},
    containers: d.spec?.template.spec?.containers ?? [],
  }));
}

function checkService(report: Report, svc: Obj<IService>, render: Render): void {
  const subject = describe(svc);
  const pods = podsOf(render).filter((p) => selects(svc.spec?.selector, p.labels));
  if (!report.expect(pods.length > 0, subject, 'spec.selector selects the Deployment pods')) return;
  const containers = pods.flatMap((p) => p.containers);
  const ports = svc.spec?.ports ?? [];
  for (const port of ports) {
    const target = resolvePort(port.targetPort ?? port.port, containers);
    report.expect(target !== undefined, subject, `port ${port.name ?? port.port} targets a container port`,
      `targetPort ${String(port.targetPort)}`);
  }
  for (const [name, number] of [['http', HTTP_PORT], ['metrics', METRICS_PORT]] as const) {
    const port = ports.find((p) => p.name === name);
    report.expect(port !== undefined && resolvePort(port.targetPort ?? port.port, containers) === number, subject,
      `port "${name}" exposes container port ${number}`);
  }
}

function checkHpa(report: Report, hpa: Obj<IHorizontalPodAutoscaler>, render: Render): void {
  const subject = describe(hpa);
  const spec = hpa.spec;
  const target = ofKind<IDeployment>(render, 'Deployment').find((d) => d.metadata.name === spec?.scaleTargetRef.name);
  report.expect(spec?.scaleTargetRef.kind === 'Deployment' && target !== undefined, subject, 'scaleTargetRef is a Deployment of the render');
  report.expect((spec?.minReplicas ?? 1) <= (spec?.maxReplicas ?? 0), subject, 'minReplicas <= maxReplicas');
  const resources = (spec?.metrics ?? []).filter((m) => m.type === 'Resource').map((m) => m.resource?.name ?? '');
  const containers = target?.spec?.template.spec?.containers ?? [];
  for (const resource of resources) {
    report.expect(containers.every((c) => c.resources?.requests?.[resource] !== undefined), subject,
      `every container requests ${resource} (utilization targets need requests)`);
  }
}

function checkPdb(report: Report, pdb: Obj<IPodDisruptionBudget>, render: Render): void {
  const subject = describe(pdb);
  report.expect(podsOf(render).some((p) => selects(pdb.spec?.selector?.matchLabels, p.labels)), subject, 'selects the Deployment pods');
  const min = pdb.spec?.minAvailable;
  const deployment = ofKind<IDeployment>(render, 'Deployment')[0];
  const hpa = ofKind<IHorizontalPodAutoscaler>(render, 'HorizontalPodAutoscaler')[0];
  const replicas = deployment?.spec?.replicas ?? hpa?.spec?.minReplicas ?? 1;
  if (typeof min === 'number') {
    report.expect(min < replicas, subject, `minAvailable ${min} < replicas ${replicas} (node drains can proceed)`);
  }
  if (typeof pdb.spec?.maxUnavailable === 'number') {
    report.expect(pdb.spec.maxUnavailable > 0, subject, 'maxUnavailable > 0 (node drains can proceed)');
  }
}

function checkIngress(report: Report, ing: Obj<IIngress>, render: Render): void {
  const services = ofKind<IService>(render, 'Service');
  for (const rule of ing.spec?.rules ?? []) {
    for (const path of rule.http?.paths ?? []) {
      const backend = path.backend.service;
      const svc = services.find((s) => s.metadata.name === backend?.name);
      const port = svc?.spec?.ports?.find((p) => (backend?.port?.name ? p.name === backend.port.name : p.port === backend?.port?.number));
      report.expect(port !== undefined, describe(ing), `${rule.host ?? '*'}${path.path ?? ''} routes to a port of a Service of the render`);
      report.expect(port?.name === 'http', describe(ing), `${rule.host ?? '*'}${path.path ?? ''} routes to the http port (never metrics)`);
    }
  }
}

function checkNetworkPolicy(report: Report, np: Obj<INetworkPolicy>, render: Render, testPods: Obj<IPod>[]): void {
  const subject = describe(np);
  const pods = podsOf(render).filter((p) => selects(np.spec?.podSelector.matchLabels, p.labels));
  if (!report.expect(pods.length > 0, subject, 'podSelector selects the Deployment pods')) return;
  const containers = pods.flatMap((p) => p.containers);
  for (const rule of np.spec?.ingress ?? []) {
    for (const port of rule.ports ?? []) {
      report.expect(resolvePort(port.port, containers) !== undefined, subject, `ingress port ${String(port.port)} is a container port`);
    }
    const http = (rule.ports ?? []).some((p) => resolvePort(p.port, containers) === HTTP_PORT);
    if (http && rule.from && rule.from.length > 0) {
      for (const test of testPods) {
        report.expect(rule.from.some((peer) => !peer.namespaceSelector && selects(peer.podSelector?.matchLabels, test.metadata.labels)),
          subject, `http ingress admits the helm test pod ${describe(test)}`);
      }
    }
  }
}

function checkTestPod(report: Report, pod: Obj<IPod>, render: Render): void {
  const subject = describe(pod);
  if (!pod.spec) {
    report.fail(subject, 'has a spec');
    return;
  }
  checkHardening(report, subject, pod.spec);
  report.expect(pod.spec.restartPolicy === 'Never', subject, 'restartPolicy: Never');
  const deployments = ofKind<IDeployment>(render, 'Deployment');
  report.expect(!deployments.some((d) => selects(d.spec?.selector.matchLabels, pod.metadata.labels)), subject,
    'labels are not selected by the Deployment (its ReplicaSet would adopt the pod)');
  const words = pod.spec.containers.flatMap((c) => [...(c.command ?? []), ...(c.args ?? [])]);
  report.expect(words.some((w) => w.endsWith('/readyz')), subject, 'requests /readyz');
}

export function checkRender(report: Report, render: Render): void {
  const deployments = ofKind<IDeployment>(render, 'Deployment');
  report.expect(deployments.length === 1, 'render', 'exactly one Deployment', `found ${deployments.length}`);
  const pods = ofKind<IPod>(render, 'Pod');
  const testPods = pods.filter((p) => p.metadata.annotations?.['helm.sh/hook'] === 'test');
  report.expect(testPods.length > 0, 'render', 'a helm test pod (helm.sh/hook: test)');
  for (const d of deployments) checkDeployment(report, d, render);
  for (const svc of ofKind<IService>(render, 'Service')) checkService(report, svc, render);
  for (const hpa of ofKind<IHorizontalPodAutoscaler>(render, 'HorizontalPodAutoscaler')) checkHpa(report, hpa, render);
  for (const pdb of ofKind<IPodDisruptionBudget>(render, 'PodDisruptionBudget')) checkPdb(report, pdb, render);
  for (const ing of ofKind<IIngress>(render, 'Ingress')) checkIngress(report, ing, render);
  for (const np of ofKind<INetworkPolicy>(render, 'NetworkPolicy')) checkNetworkPolicy(report, np, render, testPods);
  for (const sm of render.objects.filter((o) => o.kind === 'ServiceMonitor')) {
    checkServiceMonitor(report, sm, ofKind<IService>(render, 'Service'));
  }
  for (const pod of testPods) checkTestPod(report, pod, render);
}
