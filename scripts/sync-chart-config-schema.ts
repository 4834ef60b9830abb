/**
 * Keeps the `config` part of helm/nova-gateway/values.schema.json equal to the gateway's own config
 * schema (src/config/schema.ts), so a config the chart accepts is one the gateway accepts and a
 * typo inside `config` fails `helm install` rather than the pods' start-up.
 *
 *   npx tsx scripts/sync-chart-config-schema.ts           # check: exit 1 when out of date
 *   npx tsx scripts/sync-chart-config-schema.ts --write   # update values.schema.json
 *
 * Differences on purpose: `server.drain_timeout_ms` is left out (the chart sets the drain timeout
 * from shutdown.drainTimeoutSeconds, and sizes terminationGracePeriodSeconds from it), and a model
 * must set exactly one of `provider`, `upstream` and `targets` (the gateway checks that after the schema).
 *
 * The schema's `default` annotations are kept: the chart passes `config` to the gateway as it is,
 * so they are the values the gateway uses for a field left out (helm itself ignores them).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';
import { GatewayConfigSchema } from '../src/config/schema.js';

const SCHEMA_FILE = 'helm/nova-gateway/values.schema.json';

type Json = Record<string, unknown>;

function isJson(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function at(schema: Json, ...path: string[]): Json {
  let node: unknown = schema;
  for (const key of path) node = isJson(node) ? node[key] : undefined;
  if (!isJson(node)) throw new Error(`gateway config schema has no ${path.join('.')}`);
  return node;
}

/** The chart's `config` schema, derived from the gateway's. */
function chartConfigSchema(): Json {
  const schema = JSON.parse(JSON.stringify(GatewayConfigSchema)) as Json;
  const server = at(schema, 'properties', 'server', 'properties');
  delete server.drain_timeout_ms;
  const model = at(schema, 'properties', 'models', 'items');
  const one = (field: string, others: string[]) => ({ required: [field], not: { anyOf: others.map((other) => ({ required: [other] })) } });
  model.oneOf = [one('provider', ['upstream', 'targets']), one('upstream', ['provider', 'targets']), one('targets', ['provider', 'upstream'])];
  schema.description =
    'gateway.yaml (generated from src/config/schema.ts by scripts/sync-chart-config-schema.ts; ' +
    'server.drain_timeout_ms comes from shutdown.drainTimeoutSeconds).';
  return schema;
}

function main(write: boolean): number {
  const values = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as Json;
  const properties = at(values, 'properties');
  const wanted = chartConfigSchema();
  if (isDeepStrictEqual(properties.config, wanted)) {
    console.log(`  ok   ${SCHEMA_FILE}: config schema matches src/config/schema.ts`);
    return 0;
  }
  if (!write) {
    console.error(`${SCHEMA_FILE}: the config schema differs from src/config/schema.ts.`);
    console.error('Run `npx tsx scripts/sync-chart-config-schema.ts --write`, then document new fields in');
    console.error('helm/nova-gateway/README.md and docs/kubernetes.md if operators should know them.');
    return 1;
  }
  properties.config = wanted;
  writeFileSync(SCHEMA_FILE, `${JSON.stringify(values, null, 2)}\n`);
  console.log(`updated the config schema in ${SCHEMA_FILE}`);
  return 0;
}

process.exitCode = main(process.argv.includes('--write'));
