// The floors of src/ (scripts/import-floors.ts) are what `npm run lint:imports` holds every import
// to, and docs/layout.md is where a newcomer reads them: every folder of src/ has a floor, and the
// page gives each folder the floor the check uses.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { FLOORS, SRC_ROOT_FILES } from '../../scripts/import-floors.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

/** Folder -> floor, as the check reads them. */
function floorsByFolder(): Map<string, number> {
  return new Map(
    FLOORS.flatMap((floor, level) =>
      floor.filter((folder) => folder !== SRC_ROOT_FILES).map((folder): [string, number] => [folder, level]),
    ),
  );
}

describe('the floors of src/', () => {
  it('give every folder of src/ a floor, and name no folder that is not there', () => {
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => entry.name)
      .sort();
    expect([...floorsByFolder().keys()].sort()).toEqual(folders);
  });

  it('are the ones docs/layout.md tells, folder by folder', () => {
    const page = readFileSync(join(root, 'docs/layout.md'), 'utf8');
    const told = new Map<string, number>();
    for (const row of page.matchAll(/^\| (\d+) \| `([a-z-]+)\/` \|/gm))
      told.set(row[2] ?? '', Number(row[1]));
    expect(told).toEqual(floorsByFolder());
    expect(page).toContain(`| 0 | files in \`src/\` |`);
    expect(FLOORS[0]).toContain(SRC_ROOT_FILES);
  });
});
