/** Checks of one pod spec: hardening, probes, ports, graceful shutdown, /tmp, resources. */
import type { IContainer, IEnvVar, IPodSpec } from 'kubernetes-models/v1';
import type { Report } from './report.js';

export const HTTP_PORT = 8080;
export const METRICS_PORT = 9464;

/** The containerPort a probe/service/policy port (number or name) points at, if the container declares it. */
export function resolvePort(port: number | string | undefined, containers: IContainer[]): number | undefined {
  const declared = containers.flatMap((c) => c.ports ?? []);
  const found = typeof port === 'number'
    ? declared.find((p) => p.containerPort === port)
    : declared.find((p) => p.name !== undefined && p.name === port);
  return found?.containerPort;
}

/** Pod- and container-level securityContext of a restricted pod (Pod Security Standard "restricted"). */
export function checkHardening(report: Report, subject: string, pod: IPodSpec): void {
  const psc = pod.securityContext;
  report.expect(psc?.runAsNonRoot === true, subject, 'pod securityContext.runAsNonRoot: true');
  report.expect(psc?.seccompProfile?.type === 'RuntimeDefault', subject, 'pod securityContext.seccompProfile: RuntimeDefault');
  report.expect(psc?.runAsUser !== 0, subject, 'pod securityContext.runAsUser is not 0');
  report.expect(pod.automountServiceAccountToken === false, subject, 'automountServiceAccountToken: false');
  for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
    const sc = c.securityContext;
    const who = `${subject} container ${c.name}`;
    report.expect(sc?.runAsNonRoot === true, who, 'securityContext.runAsNonRoot: true');
    report.expect(sc?.runAsUser !== 0, who, 'securityContext.runAsUser is not 0');
    report.expect(sc?.readOnlyRootFilesystem === true, who, 'securityContext.readOnlyRootFilesystem: true');
    report.expect(sc?.allowPrivilegeEscalation === false, who, 'securityContext.allowPrivilegeEscalation: false');
    report.expect(sc?.privileged !== true, who, 'securityContext.privileged is not true');
    report.expect(sc?.capabilities?.drop?.includes('ALL') === true && (sc.capabilities.add ?? []).length === 0, who,
      'securityContext.capabilities drop ALL, add none');
    report.expect(sc?.seccompProfile?.type === 'RuntimeDefault', who, 'securityContext.seccompProfile: RuntimeDefault');
  }
}

function env(container: IContainer, name: string): IEnvVar | undefined {
  return container.env?.find((e) => e.name === name);
}

/** Seconds the preStop hook sleeps: `exec: [sleep, N]` or the native `sleep` action. */
export function preStopSleepSeconds(container: IContainer): number | undefined {
  const preStop = container.lifecycle?.preStop;
  if (preStop?.sleep) return preStop.sleep.seconds;
  const command = preStop?.exec?.command ?? [];
  const at = command.findIndex((part) => part === 'sleep' || part.endsWith('/sleep'));
  return at >= 0 && command[at + 1] !== undefined ? Number(command[at + 1]) : undefined;
}

function checkProbes(report: Report, who: string, c: IContainer): void {
  const ports = [c];
  const expected = [['startupProbe', undefined], ['livenessProbe', '/livez'], ['readinessProbe', '/readyz']] as const;
  for (const [name, path] of expected) {
    const get = c[name]?.httpGet;
    const port = resolvePort(get?.port, ports);
    const okPath = path === undefined ? get?.path === '/livez' || get?.path === '/readyz' : get?.path === path;
    report.expect(okPath && port === HTTP_PORT, who, `${name} GET ${path ?? '/livez|/readyz'} on the http port ${HTTP_PORT}`,
      `got ${get?.path ?? 'no httpGet'} on ${String(get?.port)} (= ${String(port)})`);
  }
}

/** The gateway container(s) of the Deployment: ports, probes, shutdown, resources, /tmp. */
export function checkGatewayPod(report: Report, subject: string, pod: IPodSpec): void {
  checkHardening(report, subject, pod);
  const grace = pod.terminationGracePeriodSeconds;
  for (const c of pod.containers) {
    const who = `${subject} container ${c.name}`;
    const named = (name: string) => c.ports?.find((p) => p.name === name)?.containerPort;
    report.expect(named('http') === HTTP_PORT, who, `port "http" is ${HTTP_PORT}`);
    report.expect(named('metrics') === METRICS_PORT, who, `port "metrics" is ${METRICS_PORT}`);
    checkProbes(report, who, c);

    const sleep = preStopSleepSeconds(c);
    const drainMs = Number(env(c, 'NOVA_DRAIN_TIMEOUT_MS')?.value ?? Number.NaN);
    report.expect(sleep !== undefined && sleep > 0, who, 'preStop hook sleeps');
    report.expect(typeof grace === 'number' && sleep !== undefined && grace > sleep, subject,
      'terminationGracePeriodSeconds > preStop sleep', `${String(grace)} vs ${String(sleep)}`);
    if (Number.isFinite(drainMs) && sleep !== undefined) {
      const needed = sleep + drainMs / 1000;
      report.expect(typeof grace === 'number' && grace > needed, subject,
        `terminationGracePeriodSeconds ${String(grace)} > preStop ${sleep}s + drain ${drainMs / 1000}s`);
    } else {
      report.fail(who, 'NOVA_DRAIN_TIMEOUT_MS env is a literal number of milliseconds');
    }

    const requests = c.resources?.requests ?? {};
    report.expect(requests.cpu !== undefined && requests.memory !== undefined, who, 'resources.requests cpu and memory');
    report.expect(c.resources?.limits?.memory !== undefined, who, 'resources.limits.memory');

    const tmp = c.volumeMounts?.find((m) => m.mountPath === '/tmp');
    const tmpVolume = pod.volumes?.find((v) => v.name === tmp?.name);
    report.expect(tmpVolume?.emptyDir !== undefined, who, '/tmp is an emptyDir (read-only root filesystem)');
  }
}
