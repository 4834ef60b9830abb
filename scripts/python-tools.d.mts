export const REQUIREMENTS: string;
export function cacheDir(): string;
export interface PythonTools {
  /** The virtualenv's directory. */
  venv: string;
  /** Its python, which imports the openai SDK. */
  python: string;
  /** The command that runs the schemathesis CLI: `[python, '-m', 'schemathesis.cli']`. */
  schemathesis: [string, ...string[]];
}
export function ensurePythonTools(options?: { log?: (line: string) => void }): Promise<PythonTools>;
export function pythonTools(): Promise<PythonTools>;
