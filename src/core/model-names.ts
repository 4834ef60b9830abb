import { matchesGlob } from './glob.js';

/** A model of the config as far as the names clients send for it go. */
export interface NamedModel {
  id: string;
  aliases?: string[];
}

/**
 * The configured model a name a client sends stands for (`models[].aliases`): a configured id
 * first, then an exact alias, then the first `*` pattern that matches, in config order. Claude
 * Code, for one, sends Claude ids (`claude-opus-4-8`) unless told otherwise.
 */
export class ModelNames {
  private readonly exact = new Map<string, string>();
  private readonly patterns: { pattern: string; id: string }[] = [];

  constructor(models: readonly NamedModel[]) {
    for (const model of models) this.exact.set(model.id, model.id);
    for (const model of models) {
      for (const alias of model.aliases ?? []) {
        if (alias.includes('*')) this.patterns.push({ pattern: alias, id: model.id });
        else if (!this.exact.has(alias)) this.exact.set(alias, model.id);
      }
    }
  }

  /** The configured id `name` stands for; undefined when none. */
  resolve(name: string): string | undefined {
    const id = this.exact.get(name);
    if (id !== undefined || this.patterns.length === 0) return id;
    for (const { pattern, id: matched } of this.patterns) if (matchesGlob(pattern, name)) return matched;
    return undefined;
  }
}
