// Writes the keyroll.io CRDs (helm/keyroll/crds/ and deploy/crds/) from the zod schemas of
// src/crd/kinds/ (`npm run schema:crds`). test/crd/crds.test.ts fails when a committed file differs.
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { crdFiles } from '../src/crd/schema/crds.ts';

for (const [path, text] of Object.entries(crdFiles())) {
  const target = new URL(`../${path}`, import.meta.url);
  await mkdir(dirname(target.pathname), { recursive: true });
  await writeFile(target, text);
  console.log(`wrote ${path}`);
}
