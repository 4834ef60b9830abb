/**
 * Checks the import graph of src/: no file imports itself through others (no circles), and no
 * import runs upward through the layers below, lowest first. The layers and the reading order are
 * in docs/architecture.md.
 *
 *   npx tsx scripts/check-import-layers.ts        # exit 1, naming each offending import
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';

/** Lowest first: a folder may import its own files and those of the folders before it. */
export const LAYERS = ['core', 'store', 'config', 'tracing', 'http', 'auth', 'metrics', 'alerts', 'quota', 'model-call', 'routes', '(top)'] as const;
/** Folders outside the server's layers, which import none of them (the CLI talks to the gateway over HTTP). */
const APART = new Set(['cli', 'console']);

const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'"]*?from\s+['"](\.[^'"]+)['"]/g;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return path.endsWith('.ts') ? [path] : [];
  });
}

/** The layer of a file: its first folder below src/, or (top) for server.ts and app.ts. */
function layerOf(root: string, file: string): string {
  const parts = relative(root, file).split(sep);
  return parts.length > 1 ? parts[0]! : '(top)';
}

export function importGraph(root: string): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(root)) {
    const targets = [...readFileSync(file, 'utf8').matchAll(IMPORT)].map((match) => normalize(join(dirname(file), match[1]!.replace(/\.js$/, '.ts'))));
    graph.set(file, targets);
  }
  return graph;
}

/** Every import circle, as the files on it (strongly connected components of more than one file, or a file importing itself). */
export function circles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (file: string) => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!graph.has(target)) continue;
      if (!index.has(target)) {
        visit(target);
        low.set(file, Math.min(low.get(file)!, low.get(target)!));
      } else if (onStack.has(target)) low.set(file, Math.min(low.get(file)!, index.get(target)!));
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)!.includes(file)) found.push(component);
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

/** Every import that runs upward, or into or out of a folder that stands apart, as "from -> to". */
export function upwardImports(root: string, graph: Map<string, string[]>): string[] {
  const rank = (layer: string) => (LAYERS as readonly string[]).indexOf(layer);
  const problems: string[] = [];
  for (const [file, targets] of graph) {
    const from = layerOf(root, file);
    for (const target of targets) {
      const to = layerOf(root, target);
      if (from === to) continue;
      const line = `${relative(root, file)} -> ${relative(root, target)}`;
      if (APART.has(from) || APART.has(to)) problems.push(`${line} (${APART.has(from) ? from : to} stands apart from the server's layers)`);
      else if (rank(from) === -1 || rank(to) === -1) problems.push(`${line} (a folder that is not in LAYERS)`);
      else if (rank(to) > rank(from)) problems.push(`${line} (${from} is below ${to})`);
    }
  }
  return problems;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = process.argv[2] ?? 'src';
  const graph = importGraph(root);
  const problems = [...circles(graph).map((circle) => `import circle: ${circle.map((file) => relative(root, file)).join(' <-> ')}`), ...upwardImports(root, graph)];
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) {
    console.error(`${problems.length} import problem(s); the layers, lowest first: ${LAYERS.join(' < ')}`);
    process.exit(1);
  }
  console.log(`${graph.size} files, no import circles, no upward imports (${LAYERS.join(' < ')})`);
}
