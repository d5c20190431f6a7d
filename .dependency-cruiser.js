// @ts-check
// The import-graph check (`npm run lint:imports`, part of `npm run lint`): every import under src/
// keeps to the floors of scripts/import-floors.ts. A folder imports only from the floors below its
// own, so no import climbs a floor and no two folders form a circle. Type-only and dynamic imports
// count too: a type import ties the folders together as much as any other.
import { FLOORS, SRC_ROOT_FILES } from './scripts/import-floors.ts';

const folders = FLOORS.flat().filter((folder) => folder !== SRC_ROOT_FILES);
/** @param {string} folder */
const pathOf = (folder) => (folder === SRC_ROOT_FILES ? '^src/[^/]+$' : `^src/${folder}/`);
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
