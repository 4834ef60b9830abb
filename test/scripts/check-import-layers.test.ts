import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { circles, importGraph, upwardImports } from '../../scripts/check-import-layers.js';

describe('import layers of src/', () => {
  it('has no import circles and no import that runs upward', () => {
    const graph = importGraph('src');
    expect(graph.size).toBeGreaterThan(100);
    expect(circles(graph)).toEqual([]);
    expect(upwardImports('src', graph)).toEqual([]);
  });

  describe('the check itself', () => {
    let root: string;
    afterEach(() => rmSync(root, { recursive: true, force: true }));
    const tree = (files: Record<string, string>) => {
      root = mkdtempSync(join(tmpdir(), 'nova-layers-'));
      for (const [path, text] of Object.entries(files)) {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      }
      return importGraph(root);
    };

    it('names an upward import and a circle', () => {
      const graph = tree({
        'core/ids.ts': "import { x } from '../quota/limit.js';\n",
        'quota/limit.ts': "import { a } from './a.js';\nexport const x = 1;\n",
        'quota/a.ts': "import { x } from './limit.js';\nexport const a = x;\n",
      });
      expect(upwardImports(root, graph)).toEqual(['core/ids.ts -> quota/limit.ts (core is below quota)']);
      expect(circles(graph).map((circle) => circle.length)).toEqual([2]);
    });

    it('accepts imports that run down and within a folder', () => {
      const graph = tree({
        'routes/v1.ts': "import { serve } from '../model-call/model-call.js';\nimport type { A } from './a.js';\n",
        'routes/a.ts': 'export type A = 1;\n',
        'model-call/model-call.ts': "import { x } from '../core/ids.js';\nexport const serve = x;\n",
        'core/ids.ts': 'export const x = 1;\n',
      });
      expect(upwardImports(root, graph)).toEqual([]);
      expect(circles(graph)).toEqual([]);
    });
  });
});
