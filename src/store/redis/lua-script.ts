import { readFileSync } from 'node:fs';

/**
 * A Lua script from its .lua file beside the caller, read once at module load:
 * `luaScript(new URL('./name.lua', import.meta.url))`. `constants` become `local NAME = value` lines
 * before it (values the TypeScript side shares with the script), then `functions`, shared Lua
 * function definitions read the same way. `npm run build` copies src's .lua files into dist/.
 */
export function luaScript(file: URL, constants: Record<string, number> = {}, functions: string[] = []): string {
  let prelude = '';
  for (const [name, value] of Object.entries(constants)) prelude += `local ${name} = ${value}\n`;
  return prelude + functions.join('') + readFileSync(file, 'utf8');
}
