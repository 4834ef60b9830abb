/**
 * Unknown-field check for the pod templates the chart writes by hand.
 *
 * kubernetes-models validates types and required fields but accepts unknown ones, so a template
 * typo such as `readOnlyRootFilesytem` would pass it (and the API server would drop the field,
 * or reject it under strict field validation). The key lists below are typed as
 * `Record<keyof I…, true>`: tsc fails if one misses or invents a field of kubernetes-models' types.
 */
import type { IDeploymentSpec } from 'kubernetes-models/apps/v1';
import type {
  ICapabilities,
  IContainer,
  IContainerPort,
  IEmptyDirVolumeSource,
  IEnvFromSource,
  IEnvVar,
  IExecAction,
  IHTTPGetAction,
  ILifecycle,
  ILifecycleHandler,
  IPodSecurityContext,
  IPodSpec,
  IPodTemplateSpec,
  IProbe,
  IResourceRequirements,
  ISeccompProfile,
  ISecurityContext,
  IServicePort,
  IServiceSpec,
  ITopologySpreadConstraint,
  IVolume,
  IVolumeMount,
} from 'kubernetes-models/v1';
import { isRecord, type Report } from './report.js';

type Fields<T> = Record<keyof T, true>;
type ObjectMeta = NonNullable<IPodTemplateSpec['metadata']>;

const fields = <T>(all: Fields<T>): ReadonlySet<string> => new Set(Object.keys(all));

const OBJECT_META = fields<ObjectMeta>({
  annotations: true, creationTimestamp: true, deletionGracePeriodSeconds: true, deletionTimestamp: true,
  finalizers: true, generateName: true, generation: true, labels: true, managedFields: true, name: true,
  namespace: true, ownerReferences: true, resourceVersion: true, selfLink: true, uid: true,
});
const DEPLOYMENT_SPEC = fields<IDeploymentSpec>({
  minReadySeconds: true, paused: true, progressDeadlineSeconds: true, replicas: true,
  revisionHistoryLimit: true, selector: true, strategy: true, template: true,
});
const POD_TEMPLATE = fields<IPodTemplateSpec>({ metadata: true, spec: true });
const POD_SPEC = fields<IPodSpec>({
  activeDeadlineSeconds: true, affinity: true, automountServiceAccountToken: true, containers: true,
  dnsConfig: true, dnsPolicy: true, enableServiceLinks: true, ephemeralContainers: true, hostAliases: true,
  hostIPC: true, hostNetwork: true, hostPID: true, hostUsers: true, hostname: true, imagePullSecrets: true,
  initContainers: true, nodeName: true, nodeSelector: true, os: true, overhead: true, preemptionPolicy: true,
  priority: true, priorityClassName: true, readinessGates: true, resourceClaims: true, resources: true,
  restartPolicy: true, runtimeClassName: true, schedulerName: true, schedulingGates: true,
  securityContext: true, serviceAccount: true, serviceAccountName: true, setHostnameAsFQDN: true,
  shareProcessNamespace: true, subdomain: true, terminationGracePeriodSeconds: true, tolerations: true,
  topologySpreadConstraints: true, volumes: true,
});
const POD_SECURITY_CONTEXT = fields<IPodSecurityContext>({
  appArmorProfile: true, fsGroup: true, fsGroupChangePolicy: true, runAsGroup: true, runAsNonRoot: true,
  runAsUser: true, seLinuxChangePolicy: true, seLinuxOptions: true, seccompProfile: true,
  supplementalGroups: true, supplementalGroupsPolicy: true, sysctls: true, windowsOptions: true,
});
const CONTAINER = fields<IContainer>({
  args: true, command: true, env: true, envFrom: true, image: true, imagePullPolicy: true, lifecycle: true,
  livenessProbe: true, name: true, ports: true, readinessProbe: true, resizePolicy: true, resources: true,
  restartPolicy: true, securityContext: true, startupProbe: true, stdin: true, stdinOnce: true,
  terminationMessagePath: true, terminationMessagePolicy: true, tty: true, volumeDevices: true,
  volumeMounts: true, workingDir: true,
});
const SECURITY_CONTEXT = fields<ISecurityContext>({
  allowPrivilegeEscalation: true, appArmorProfile: true, capabilities: true, privileged: true, procMount: true,
  readOnlyRootFilesystem: true, runAsGroup: true, runAsNonRoot: true, runAsUser: true, seLinuxOptions: true,
  seccompProfile: true, windowsOptions: true,
});
const CAPABILITIES = fields<ICapabilities>({ add: true, drop: true });
const SECCOMP = fields<ISeccompProfile>({ localhostProfile: true, type: true });
const CONTAINER_PORT = fields<IContainerPort>({ containerPort: true, hostIP: true, hostPort: true, name: true, protocol: true });
const PROBE = fields<IProbe>({
  exec: true, failureThreshold: true, grpc: true, httpGet: true, initialDelaySeconds: true, periodSeconds: true,
  successThreshold: true, tcpSocket: true, terminationGracePeriodSeconds: true, timeoutSeconds: true,
});
const HTTP_GET = fields<IHTTPGetAction>({ host: true, httpHeaders: true, path: true, port: true, scheme: true });
const LIFECYCLE = fields<ILifecycle>({ postStart: true, preStop: true, stopSignal: true });
const LIFECYCLE_HANDLER = fields<ILifecycleHandler>({ exec: true, httpGet: true, sleep: true, tcpSocket: true });
const EXEC = fields<IExecAction>({ command: true });
const RESOURCES = fields<IResourceRequirements>({ claims: true, limits: true, requests: true });
const ENV_VAR = fields<IEnvVar>({ name: true, value: true, valueFrom: true });
const ENV_FROM = fields<IEnvFromSource>({ configMapRef: true, prefix: true, secretRef: true });
const VOLUME_MOUNT = fields<IVolumeMount>({
  mountPath: true, mountPropagation: true, name: true, readOnly: true, recursiveReadOnly: true, subPath: true,
  subPathExpr: true,
});
const VOLUME = fields<IVolume>({
  awsElasticBlockStore: true, azureDisk: true, azureFile: true, cephfs: true, cinder: true, configMap: true,
  csi: true, downwardAPI: true, emptyDir: true, ephemeral: true, fc: true, flexVolume: true, flocker: true,
  gcePersistentDisk: true, gitRepo: true, glusterfs: true, hostPath: true, image: true, iscsi: true, name: true,
  nfs: true, persistentVolumeClaim: true, photonPersistentDisk: true, portworxVolume: true, projected: true,
  quobyte: true, rbd: true, scaleIO: true, secret: true, storageos: true, vsphereVolume: true,
});
const EMPTY_DIR = fields<IEmptyDirVolumeSource>({ medium: true, sizeLimit: true });
const TOPOLOGY_SPREAD = fields<ITopologySpreadConstraint>({
  labelSelector: true, matchLabelKeys: true, maxSkew: true, minDomains: true, nodeAffinityPolicy: true,
  nodeTaintsPolicy: true, topologyKey: true, whenUnsatisfiable: true,
});
const SERVICE_SPEC = fields<IServiceSpec>({
  allocateLoadBalancerNodePorts: true, clusterIP: true, clusterIPs: true, externalIPs: true, externalName: true,
  externalTrafficPolicy: true, healthCheckNodePort: true, internalTrafficPolicy: true, ipFamilies: true,
  ipFamilyPolicy: true, loadBalancerClass: true, loadBalancerIP: true, loadBalancerSourceRanges: true,
  ports: true, publishNotReadyAddresses: true, selector: true, sessionAffinity: true,
  sessionAffinityConfig: true, trafficDistribution: true, type: true,
});
const SERVICE_PORT = fields<IServicePort>({ appProtocol: true, name: true, nodePort: true, port: true, protocol: true, targetPort: true });

/** Collects unknown field names below one object. */
class Walker {
  readonly unknown: string[] = [];

  object(path: string, value: unknown, known: ReadonlySet<string>): Record<string, unknown> | undefined {
    if (!isRecord(value)) return undefined;
    for (const key of Object.keys(value)) {
      if (!known.has(key)) this.unknown.push(`${path}.${key}`);
    }
    return value;
  }

  list(path: string, value: unknown, each: (itemPath: string, item: unknown) => void): void {
    if (Array.isArray(value)) value.forEach((item, index) => each(`${path}[${index}]`, item));
  }
}

function probe(walk: Walker, path: string, value: unknown): void {
  const p = walk.object(path, value, PROBE);
  if (p) walk.object(`${path}.httpGet`, p.httpGet, HTTP_GET);
}

function securityContext(walk: Walker, path: string, value: unknown, known: ReadonlySet<string>): void {
  const sc = walk.object(path, value, known);
  if (!sc) return;
  walk.object(`${path}.seccompProfile`, sc.seccompProfile, SECCOMP);
  if (known === SECURITY_CONTEXT) walk.object(`${path}.capabilities`, sc.capabilities, CAPABILITIES);
}

function container(walk: Walker, path: string, value: unknown): void {
  const c = walk.object(path, value, CONTAINER);
  if (!c) return;
  walk.list(`${path}.ports`, c.ports, (p, item) => walk.object(p, item, CONTAINER_PORT));
  walk.list(`${path}.env`, c.env, (p, item) => walk.object(p, item, ENV_VAR));
  walk.list(`${path}.envFrom`, c.envFrom, (p, item) => walk.object(p, item, ENV_FROM));
  walk.list(`${path}.volumeMounts`, c.volumeMounts, (p, item) => walk.object(p, item, VOLUME_MOUNT));
  for (const name of ['startupProbe', 'livenessProbe', 'readinessProbe'] as const) probe(walk, `${path}.${name}`, c[name]);
  walk.object(`${path}.resources`, c.resources, RESOURCES);
  securityContext(walk, `${path}.securityContext`, c.securityContext, SECURITY_CONTEXT);
  const lifecycle = walk.object(`${path}.lifecycle`, c.lifecycle, LIFECYCLE);
  if (lifecycle) {
    for (const hook of ['preStop', 'postStart'] as const) {
      const handler = walk.object(`${path}.lifecycle.${hook}`, lifecycle[hook], LIFECYCLE_HANDLER);
      if (handler) walk.object(`${path}.lifecycle.${hook}.exec`, handler.exec, EXEC);
    }
  }
}

/** Unknown fields of a pod spec (containers, probes, security contexts, volumes, spread constraints). */
function podSpec(walk: Walker, path: string, value: unknown): void {
  const spec = walk.object(path, value, POD_SPEC);
  if (!spec) return;
  securityContext(walk, `${path}.securityContext`, spec.securityContext, POD_SECURITY_CONTEXT);
  walk.list(`${path}.containers`, spec.containers, (p, item) => container(walk, p, item));
  walk.list(`${path}.initContainers`, spec.initContainers, (p, item) => container(walk, p, item));
  walk.list(`${path}.volumes`, spec.volumes, (p, item) => {
    const volume = walk.object(p, item, VOLUME);
    if (volume) walk.object(`${p}.emptyDir`, volume.emptyDir, EMPTY_DIR);
  });
  walk.list(`${path}.topologySpreadConstraints`, spec.topologySpreadConstraints, (p, item) =>
    walk.object(p, item, TOPOLOGY_SPREAD),
  );
}

export function checkKnownFields(report: Report, subject: string, kind: string, obj: Record<string, unknown>): void {
  const walk = new Walker();
  walk.object('metadata', obj.metadata, OBJECT_META);
  if (kind === 'Deployment') {
    const spec = walk.object('spec', obj.spec, DEPLOYMENT_SPEC);
    const template = walk.object('spec.template', spec?.template, POD_TEMPLATE);
    walk.object('spec.template.metadata', template?.metadata, OBJECT_META);
    podSpec(walk, 'spec.template.spec', template?.spec);
  } else if (kind === 'Pod') {
    podSpec(walk, 'spec', obj.spec);
  } else if (kind === 'Service') {
    const spec = walk.object('spec', obj.spec, SERVICE_SPEC);
    walk.list('spec.ports', spec?.ports, (p, item) => walk.object(p, item, SERVICE_PORT));
  } else {
    return;
  }
  report.expect(walk.unknown.length === 0, subject, 'no unknown fields', walk.unknown.join(', '));
}
