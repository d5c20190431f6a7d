import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { describe, expect, it } from 'vitest';
import { crdFiles, customResourceDefinition } from '../../src/crd/schema/crds.ts';
import { KIND_NAMES } from '../../src/crd/kinds/kinds.ts';
import type { JsonSchema } from '../../src/crd/schema/structural.ts';

const root = new URL('../../', import.meta.url);

/**
 * The structural-schema rules the generator relies on (Kubernetes' "Specifying a structural
 * schema"), as a list of problems: every node has a type; no $ref, oneOf, anyOf, allOf or not
 * beside one; properties and additionalProperties exclude each other; no default or
 * additionalProperties: false; a list-map's keys are required fields of its items.
 * The real API server checks the same and more (test/integration/kube-crds.test.ts).
 */
function structuralProblems(node: unknown, at = ''): string[] {
  if (typeof node !== 'object' || node === null || Array.isArray(node)) return [`${at}: not a schema`];
  const schema = node as JsonSchema;
  const problems: string[] = [];
  if (typeof schema['type'] !== 'string') problems.push(`${at}: no type`);
  for (const key of ['$ref', 'oneOf', 'anyOf', 'allOf', 'not', 'default', 'definitions', '$defs'])
    if (key in schema) problems.push(`${at}: ${key}`);
  if ('additionalProperties' in schema) {
    if (typeof schema['additionalProperties'] !== 'object')
      problems.push(`${at}: additionalProperties not a schema`);
    if ('properties' in schema) problems.push(`${at}: properties beside additionalProperties`);
    else problems.push(...structuralProblems(schema['additionalProperties'], `${at}/additionalProperties`));
  }
  for (const [name, property] of Object.entries((schema['properties'] as JsonSchema | undefined) ?? {}))
    problems.push(...structuralProblems(property, `${at}/properties/${name}`));
  if ('items' in schema) {
    problems.push(...structuralProblems(schema['items'], `${at}/items`));
    const keys = schema['x-kubernetes-list-map-keys'];
    const required = ((schema['items'] as JsonSchema)['required'] as string[] | undefined) ?? [];
    if (Array.isArray(keys))
      for (const key of keys as string[])
        if (!required.includes(key)) problems.push(`${at}: list-map key ${key} is not required`);
  }
  return problems;
}

describe('the keyroll.io CRDs', () => {
  it('are what the generator writes now (run `npm run schema:crds` after changing src/crd/kinds/)', async () => {
    for (const [path, text] of Object.entries(crdFiles()))
      expect(await readFile(new URL(path, root), 'utf8'), path).toBe(text);
  });

  it('bundle the four CRDs of the chart in deploy/crds/keyroll.io.yaml', () => {
    const files = crdFiles();
    const bundle = parseAllDocuments(files['deploy/crds/keyroll.io.yaml'] ?? '').map(
      (doc) => doc.toJS() as unknown,
    );
    const chart = Object.entries(files)
      .filter(([path]) => path.startsWith('helm/keyroll/crds/'))
      .map(([, text]) => parseAllDocuments(text).map((doc) => doc.toJS() as unknown)[0]);
    expect(bundle).toEqual(chart);
    expect(bundle).toHaveLength(4);
  });

  it.each(KIND_NAMES)('%s has a structural schema', (kind) => {
    const crd = customResourceDefinition(kind) as {
      spec: { versions: { schema: { openAPIV3Schema: unknown } }[] };
    };
    const [version] = crd.spec.versions;
    expect(structuralProblems(version?.schema.openAPIV3Schema)).toEqual([]);
  });

  it('prints READY, LAST ROTATED, NEXT, SLOT and AGE for a RotatedKey, with a status subresource', () => {
    const crd = customResourceDefinition('RotatedKey') as {
      spec: {
        names: { shortNames: string[]; categories: string[] };
        versions: { subresources: unknown; additionalPrinterColumns: { name: string; jsonPath: string }[] }[];
      };
    };
    const [version] = crd.spec.versions;
    expect(version?.subresources).toEqual({ status: {} });
    expect(
      version?.additionalPrinterColumns.map((column) => [column.name.toUpperCase(), column.jsonPath]),
    ).toEqual([
      ['READY', '.status.conditions[?(@.type=="Ready")].status'],
      ['LAST ROTATED', '.status.lastRotated'],
      ['NEXT', '.status.nextRotation'],
      ['SLOT', '.status.activeSlot'],
      ['AGE', '.metadata.creationTimestamp'],
    ]);
    expect(crd.spec.names).toMatchObject({ shortNames: ['rk'], categories: ['keyroll'] });
  });
});
