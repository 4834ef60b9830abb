/**
 * Checks a chart's values files against its values.schema.json without helm (ajv, JSON Schema
 * draft-07), so the schema is still exercised on machines where helm is unavailable.
 *
 *   npx tsx scripts/check-chart-values.ts <chart-dir> [<broken-values-dir>]
 *
 * - values.yaml must be valid;
 * - every <chart-dir>/ci/*.yaml, merged over values.yaml the way helm merges (maps merge, lists
 *   and scalars replace, null deletes), must be valid;
 * - every <broken-values-dir>/*.yaml marked `# rejected-by: schema` must be INVALID. Files marked
 *   `# rejected-by: template` are rejected by template logic, which only helm can run;
 * - <chart-dir>/README.md names every value (`key`, or `key.*` / a documented parent map).
 * Exits 1 on any violation.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv, type ErrorObject } from 'ajv';
import { parse } from 'yaml';

type Values = Record<string, unknown>;

function isMap(value: unknown): value is Values {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** helm's coalescing of a user values file over the chart's values. */
function mergeValues(base: Values, override: Values): Values {
  const out: Values = { ...base };
  for (const [key, value] of Object.entries(override)) {
    if (value === null) delete out[key];
    else if (isMap(value) && isMap(out[key])) out[key] = mergeValues(out[key], value);
    else out[key] = value;
  }
  return out;
}

function readValues(file: string): Values {
  const doc: unknown = parse(readFileSync(file, 'utf8'));
  if (doc === null || doc === undefined) return {};
  if (!isMap(doc)) throw new Error(`${file}: values must be a YAML map`);
  return doc;
}

function yamlIn(dir: string): string[] {
  try {
    return readdirSync(dir).filter((name) => /\.ya?ml$/.test(name)).sort().map((name) => join(dir, name));
  } catch {
    return [];
  }
}

function explain(errors: ErrorObject[] | null | undefined): string {
  return (errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? ''} ${JSON.stringify(e.params)}`).join('; ');
}

/** Values keys the chart README does not document (`key` or `key.*`; a documented map covers its keys). */
function undocumented(values: Values, readme: string, prefix = ''): string[] {
  return Object.entries(values).flatMap(([key, value]) => {
    const path = prefix ? `${prefix}.${key}` : key;
    if (readme.includes(`\`${path}\``) || readme.includes(`\`${path}.*\``)) return [];
    if (isMap(value) && Object.keys(value).length > 0) return undocumented(value, readme, path);
    return [path];
  });
}

function main(chartDir: string | undefined, brokenDir: string | undefined): number {
  if (!chartDir) {
    console.error('usage: npx tsx scripts/check-chart-values.ts <chart-dir> [<broken-values-dir>]');
    return 2;
  }
  const schema: unknown = JSON.parse(readFileSync(join(chartDir, 'values.schema.json'), 'utf8'));
  const ajv = new Ajv({ allErrors: true, strict: true, strictRequired: false, allowUnionTypes: true });
  const validate = ajv.compile(schema as object);
  const defaults = readValues(join(chartDir, 'values.yaml'));
  const failures: string[] = [];

  const expectValid = (label: string, values: Values): void => {
    if (validate(values)) console.log(`  ok   ${label}: valid`);
    else failures.push(`${label}: should be valid: ${explain(validate.errors)}`);
  };
  expectValid('values.yaml', defaults);
  for (const file of yamlIn(join(chartDir, 'ci'))) expectValid(file, mergeValues(defaults, readValues(file)));

  for (const file of brokenDir ? yamlIn(brokenDir) : []) {
    const marker = /^# rejected-by: (schema|template)\b/m.exec(readFileSync(file, 'utf8'))?.[1];
    if (marker === undefined) {
      failures.push(`${file}: has no "# rejected-by: schema|template" line`);
    } else if (marker === 'template') {
      console.log(`  skip ${file}: rejected by template logic (needs helm)`);
    } else if (validate(mergeValues(defaults, readValues(file)))) {
      failures.push(`${file}: the schema ACCEPTS it, but it must be rejected`);
    } else {
      console.log(`  ok   ${file}: rejected by the schema: ${explain(validate.errors)}`);
    }
  }

  const missing = undocumented(defaults, readFileSync(join(chartDir, 'README.md'), 'utf8'));
  if (missing.length === 0) console.log('  ok   README.md documents every value');
  else failures.push(`README.md does not document: ${missing.join(', ')}`);

  if (failures.length > 0) {
    console.error(`check-chart-values: ${failures.length} FAILED:`);
    for (const line of failures) console.error(`  - ${line}`);
    return 1;
  }
  console.log('check-chart-values: passed');
  return 0;
}

process.exitCode = main(process.argv[2], process.argv[3]);
