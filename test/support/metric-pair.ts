import { Registry } from 'prom-client';

/** One of our metrics and prom-client's reference, each in a registry of its own, to compare their exports. */
export function metricPair<F, R>(ours: (registers: Registry[]) => F, theirs: (registers: Registry[]) => R) {
  const oursRegistry = new Registry();
  const theirsRegistry = new Registry();
  return { ours: oursRegistry, theirs: theirsRegistry, fast: ours([oursRegistry]), reference: theirs([theirsRegistry]) };
}
