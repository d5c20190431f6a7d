// Issue 29 §5: what the benchmarks and the tests both use lives in test/support/; bench/ takes
// nothing else of test/, not even through a shared file, and test/ takes nothing of bench/. These
// cases run the rules of .dependency-cruiser.js, as `npm run lint:imports` does, over a small tree
// of the same shape, so each case shows one thing the rules allow or refuse.
import { describe, expect, it } from 'vitest';
import { useImportRules } from '../support/import-rules.ts';

const RULES = ['bench-imports-test-support-only', 'bench-reaches-test-support-only', 'test-imports-no-bench'];
const violations = useImportRules('keyroll-test-support-imports', RULES, ['bench', 'test']);

const TESTS = {
  'test/support/fake-github.ts': 'export const startFakeGithub = () => 1;\n',
  'test/leaks/github/support.ts': 'export const deliver = () => 2;\n',
  'test/leaks/github/flow.test.ts':
    "import { startFakeGithub } from '../../support/fake-github.ts';\nexport const go = startFakeGithub;\n",
  'bench/lib/world.ts': 'export const startWorld = () => 3;\n',
};

describe('imports between bench/ and test/', () => {
  it('let bench/ and test/ both take test/support/, and bench/ its own bench/lib/', async () => {
    const found = await violations({
      ...TESTS,
      'bench/leak.ts': [
        "import { startFakeGithub } from '../test/support/fake-github.ts';",
        "import { startWorld } from './lib/world.ts';",
        'export const go = [startFakeGithub, startWorld];',
        '',
      ].join('\n'),
    });
    expect(found).toEqual({});
  });

  it("refuse bench/ a test's own file, statically and by an await import()", async () => {
    const found = await violations({
      ...TESTS,
      'bench/leak.ts':
        "import { deliver } from '../test/leaks/github/support.ts';\nexport const go = deliver;\n",
      'bench/ha.ts':
        "export const go = async () => (await import('../test/leaks/github/support.ts')).deliver();\n",
    });
    expect(found).toEqual({
      'bench/ha.ts': ['bench-imports-test-support-only', 'bench-reaches-test-support-only'],
      'bench/leak.ts': ['bench-imports-test-support-only', 'bench-reaches-test-support-only'],
    });
  });

  it("refuse bench/ a test's own file reached through test/support/", async () => {
    const found = await violations({
      ...TESTS,
      'test/support/leak-bench.ts':
        "import { deliver } from '../leaks/github/support.ts';\nexport const shared = deliver;\n",
      'bench/leak.ts': "import { shared } from '../test/support/leak-bench.ts';\nexport const go = shared;\n",
    });
    expect(found).toEqual({ 'bench/leak.ts': ['bench-reaches-test-support-only'] });
  });

  it('refuse test/ any file of bench/, bench/lib/ included', async () => {
    const found = await violations({
      ...TESTS,
      'test/rotation/consumers.test.ts':
        "import { startWorld } from '../../bench/lib/world.ts';\nexport const go = startWorld;\n",
      'test/support/world.ts': "export { startWorld } from '../../bench/lib/world.ts';\n",
    });
    expect(found).toEqual({
      'test/rotation/consumers.test.ts': ['test-imports-no-bench'],
      'test/support/world.ts': ['test-imports-no-bench'],
    });
  });
});
