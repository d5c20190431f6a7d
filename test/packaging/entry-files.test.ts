// Issue 29 §1: another folder of src/ is imported through its entry files only (docs/layout.md,
// "Entry files"). These cases run the rules of .dependency-cruiser.js, as `npm run lint:imports`
// does, over a small tree of the same shape, so each case shows one thing the rules allow or refuse.
import { describe, expect, it } from 'vitest';
import { useImportRules } from '../support/import-rules.ts';

const RULES = ['entry-files-only', 'one-rotation-path-entry'];
const violations = useImportRules('keyroll-entry-files', RULES, ['src']);

const ROTATION = {
  'src/rotation/run.ts':
    "import type { Plan } from './types.ts';\nexport const run = (plan: Plan) => plan;\n",
  'src/rotation/types.ts': 'export type Plan = string;\n',
  'src/rotation/step-roll.ts': 'export const roll = 1;\n',
  'src/rotation/public/run.ts': "export { run } from '../run.ts';\n",
  'src/rotation/public/types.ts': "export type { Plan } from '../types.ts';\n",
};

describe('imports between folders of src/', () => {
  it("refuse another folder's own file", async () => {
    const found = await violations({
      ...ROTATION,
      'src/cli/rotate.ts': "import { run } from '../rotation/run.ts';\nexport const go = run;\n",
    });
    expect(found).toEqual({ 'src/cli/rotate.ts': ['entry-files-only'] });
  });

  it("take another folder's entry files, statically and by an await import()", async () => {
    const found = await violations({
      ...ROTATION,
      'src/cli/rotate.ts': [
        "import type { Plan } from '../rotation/public/types.ts';",
        "export const go = async (plan: Plan) => (await import('../rotation/public/run.ts')).run(plan);",
        '',
      ].join('\n'),
    });
    expect(found).toEqual({});
  });

  it('leave the files of one folder, subfolders included, to import each other', async () => {
    const found = await violations({
      'src/backends/types.ts': 'export type Backend = string;\n',
      'src/backends/aws/backend.ts':
        "import type { Backend } from '../types.ts';\nexport const b: Backend = '';\n",
      'src/backends/registry.ts': "export const load = () => import('./aws/backend.ts');\n",
    });
    expect(found).toEqual({});
  });

  it("refuse a subfolder's own index.ts from another folder: the entry files are under public/", async () => {
    const found = await violations({
      'src/backends/aws/index.ts': "export const aws = 'aws';\n",
      'src/backends/public/aws/index.ts': "export { aws } from '../../aws/index.ts';\n",
      'src/cli/aws.ts': "import { aws } from '../backends/aws/index.ts';\nexport const a = aws;\n",
      'src/cli/aws-entry.ts':
        "import { aws } from '../backends/public/aws/index.ts';\nexport const a = aws;\n",
    });
    expect(found).toEqual({ 'src/cli/aws.ts': ['entry-files-only'] });
  });

  it('refuse an entry file of rotation/ for a step (one rotation path)', async () => {
    const found = await violations({
      ...ROTATION,
      'src/rotation/public/step-roll.ts': "export { roll } from '../step-roll.ts';\n",
    });
    expect(found).toEqual({ 'src/rotation/public/step-roll.ts': ['one-rotation-path-entry'] });
  });
});
