// @ts-check
// The import-graph check (`npm run lint:imports`, part of `npm run lint`): every import under src/
// keeps to the floors of scripts/import-floors.ts. A folder imports only from the floors below its
// own, so no import climbs a floor and no two folders form a circle. Type-only and dynamic imports
// count too: a type import ties the folders together as much as any other. And bench/ and test/
// share only test/support/ (the rules bench-* and test-imports-no-bench).
import { FLOORS, SRC_ROOT_FILES } from './scripts/import-floors.ts';

const folders = FLOORS.flat().filter((folder) => folder !== SRC_ROOT_FILES);
/** @param {string} folder */
const pathOf = (folder) => (folder === SRC_ROOT_FILES ? '^src/[^/]+$' : `^src/${folder}/`);
/** The entry files of a folder (docs/layout.md, "Entry files"), inside src/<folder>/. */
const ENTRY_FILES = 'public/.+[.]ts';
/** The steps and their transaction (rule one-rotation-path). */
const ROTATION_STEPS = '^src/rotation/(step-[^/]+|transaction|preflight|failure|roll|store|recovery)[.]ts$';
const noFloor =
  'every folder of src/ has a floor in scripts/import-floors.ts (and its line in docs/layout.md)';

/** @type {import('dependency-cruiser').IForbiddenRuleType[]} */
const floorRules = FLOORS.flatMap((floor, level) =>
  floor.map((folder) => {
    const below = FLOORS.slice(0, level).flat();
    return {
      name: `floor-${folder === SRC_ROOT_FILES ? 'root' : folder}`,
      severity: 'error',
      comment: `${folder} stands on floor ${String(level)}: it imports only from ${below.length === 0 ? 'itself' : `${below.join(', ')} and itself`}`,
      from: { path: pathOf(folder) },
      to: { path: '^src/', pathNot: [pathOf(folder), ...below.map(pathOf)] },
    };
  }),
);

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    ...floorRules,
    {
      // STYLE.md rule 11 (issue 29 §1): an entry point runs the engine's own sequence with options
      // (rotation/rotate-key.ts: rotateKeyUntilStored); importing the steps is how a copy begins.
      name: 'one-rotation-path',
      severity: 'error',
      comment:
        'src/lambda/ runs the rotation through rotation/rotate-key.ts; it never imports the steps or their transaction to re-state the sequence',
      from: { path: '^src/lambda/' },
      to: { path: '^src/rotation/(step-[^/]+|transaction|preflight|failure|roll|store|recovery)[.]ts$' },
    },
    {
      // Issue 29 §1: what a folder hands to the others is its entry files, src/<folder>/public/<path>.ts
      // for src/<folder>/<path>.ts (docs/layout.md, "Entry files"); the rest is its own to change.
      // $1 is the importing folder: its own files import each other freely.
      name: 'entry-files-only',
      severity: 'error',
      comment:
        'another folder of src/ is imported through its entry files only: src/<folder>/public/<path>.ts, not src/<folder>/<path>.ts (the entry-files codemod rewrites such an import)',
      from: { path: '^src/([^/]+)/' },
      to: { path: '^src/[^/]+/', pathNot: ['^src/$1/', `^src/[^/]+/${ENTRY_FILES}$`] },
    },
    {
      // The steps stay rotation's own (rule one-rotation-path): no entry file of rotation/ hands
      // them, or their transaction, to another folder.
      name: 'one-rotation-path-entry',
      severity: 'error',
      comment:
        "src/rotation/'s entry files do not re-export the steps or their transaction: other folders run them through rotate-key.ts or run.ts",
      from: { path: `^src/rotation/${ENTRY_FILES}$` },
      to: { path: ROTATION_STEPS },
    },
    {
      // Issue 29 §5: what the benchmarks and the tests both use (the fake GitHub, the alert
      // receiver, the stand-in cluster, the simulated consumer, the image's runtime) lives in
      // test/support/; the rest of test/ is the tests' own to change.
      name: 'bench-imports-test-support-only',
      severity: 'error',
      comment:
        'bench/ imports from test/ only test/support/: a file of test/ a benchmark needs moves to test/support/, named for what it is',
      from: { path: '^bench/' },
      to: { path: '^test/', pathNot: '^test/support/' },
    },
    {
      // The same through test/support/: a shared file that imports a test's own file would hand
      // it to the benchmarks all the same.
      name: 'bench-reaches-test-support-only',
      severity: 'error',
      comment:
        'no chain of imports from bench/ reaches a file of test/ outside test/support/ (a shared helper imports only what is shared)',
      from: { path: '^bench/' },
      to: { path: '^test/', pathNot: '^test/support/', reachable: true },
    },
    {
      name: 'test-imports-no-bench',
      severity: 'error',
      comment:
        'test/ never imports bench/: what a test and a benchmark both need lives in test/support/, and bench/lib/ keeps only what the benchmarks alone use',
      from: { path: '^test/' },
      to: { path: '^bench/' },
    },
    {
      name: 'folder-without-floor',
      severity: 'error',
      comment: noFloor,
      from: { path: '^src/' },
      to: { path: '^src/[^/]+/', pathNot: folders.map(pathOf) },
    },
    {
      name: 'folder-without-floor-imports',
      severity: 'error',
      comment: noFloor,
      from: { path: '^src/[^/]+/', pathNot: folders.map(pathOf) },
      to: { path: '^src/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
