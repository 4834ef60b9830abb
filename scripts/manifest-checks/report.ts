/** Shared types of the manifest checks: a rendered object and the report they write to. */

export interface ObjectMetaLike {
  name?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

/** One document of a render, as parsed from YAML (only apiVersion/kind/metadata are trusted). */
export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: ObjectMetaLike;
  [field: string]: unknown;
}

/** One `helm template` output: a label (file name) and its objects. */
export interface Render {
  label: string;
  objects: K8sObject[];
}

export class Report {
  private readonly failures: string[] = [];
  private checks = 0;

  constructor(private readonly render: string) {}

  /** Records a check; prints it as passed or failed. Returns `condition`. */
  expect(condition: boolean, subject: string, what: string, detail = ''): boolean {
    this.checks += 1;
    if (condition) {
      console.log(`  ok   ${subject}: ${what}`);
    } else {
      const line = `${subject}: ${what}${detail ? ` (${detail})` : ''}`;
      this.failures.push(line);
      console.log(`  FAIL ${line}`);
    }
    return condition;
  }

  fail(subject: string, what: string): void {
    this.expect(false, subject, what);
  }

  get failed(): readonly string[] {
    return this.failures;
  }

  get label(): string {
    return this.render;
  }

  get count(): number {
    return this.checks;
  }
}

export function describe(obj: K8sObject): string {
  return `${obj.kind}/${obj.metadata.name ?? '?'}`;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether every label of `selector` is set, with the same value, in `labels`. */
export function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (!selector || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([key, value]) => labels?.[key] === value);
}
