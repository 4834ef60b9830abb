/**
 * The Node flags the server is started with, read where they are written: package.json's start
 * script and the Dockerfile's CMD (a test keeps the two equal; the bench gives them to every Node
 * process it starts).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** The flags of a command: the words after `node` up to the first that is not a flag (the script). */
export function nodeFlagsOf(command: readonly string[]): string[] {
  const rest = command.slice(command.indexOf('node') + 1);
  const script = rest.findIndex((word) => !word.startsWith('-'));
  return script === -1 ? rest : rest.slice(0, script);
}

export function npmStartFlags(root: string): string[] {
  const { scripts } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { start: string } };
  return nodeFlagsOf(scripts.start.split(/\s+/));
}

/** The flags of the Dockerfile's CMD (exec form); none when it has no such CMD. */
export function dockerfileFlags(root: string): string[] {
  const cmd = /^CMD (\[.*\])$/m.exec(readFileSync(join(root, 'Dockerfile'), 'utf8'))?.[1];
  return cmd ? nodeFlagsOf(JSON.parse(cmd) as string[]) : [];
}
