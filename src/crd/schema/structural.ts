// Turns the JSON Schema zod writes (`z.toJSONSchema`, target openapi-3.0) into a structural
// schema, the only kind a CustomResourceDefinition may carry
// (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
//   - every node has a type, and there is no $ref: references are inlined;
//   - no oneOf/anyOf of objects: a discriminated union becomes one object holding every branch's
//     properties, and CEL rules (unions.ts) keep "one shape per discriminator value";
//   - no `additionalProperties: false` beside properties: the API server prunes unknown fields
//     instead, and `keyroll validate` (zod, strict) still names them;
//   - no `default`: a default of one union branch would be applied to every branch, and zod
//     applies the defaults when keyroll reads the object.
// Anything else the walker does not know is refused, so a new zod construct fails the generator
// rather than slipping into the CRD unchecked.
import { CrdSchemaError, isSchema, type JsonSchema } from './errors.ts';
import { mergeUnion } from './unions.ts';

export { CrdSchemaError, type JsonSchema } from './errors.ts';

/** Value validations and annotations a structural node may carry as they are. */
const KEPT = new Set([
  'type',
  'description',
  'title',
  'format',
  'enum',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
  'exclusiveMinimum',
  'exclusiveMaximum',
  'minItems',
  'maxItems',
  'minProperties',
  'maxProperties',
  'nullable',
  'required',
]);
/** What zod writes that a CRD drops (see the header). */
const DROPPED = new Set(['default', '$schema', 'id', 'definitions', '$defs', 'components']);

/** The structural form of `schema`; `root` is the document its `$ref`s point into. */
export function structural(schema: JsonSchema, root: JsonSchema = schema, at = ''): JsonSchema {
  return walk(schema, { root, refs: [] }, at);
}

/** What the walk carries down: the document, and the $refs inlined on the way here (a repeat is recursion). */
interface Walk {
  root: JsonSchema;
  refs: readonly string[];
}

function walk(schema: JsonSchema, context: Walk, at: string): JsonSchema {
  const { node, refs } = inlineRef(schema, context.root, at, context.refs);
  const inner: Walk = { root: context.root, refs };
  const union = node['oneOf'] ?? node['anyOf'];
  if (union !== undefined) {
    if (!Array.isArray(union) || !union.every(isSchema))
      throw new CrdSchemaError(at, 'oneOf/anyOf must list schemas');
    const branches = union.map((branch, index) => walk(branch, inner, `${at}/oneOf/${String(index)}`));
    const { oneOf: _oneOf, anyOf: _anyOf, ...rest } = node;
    const merged = mergeUnion(branches, at);
    const rules = [...validationsOf(rest), ...validationsOf(merged)];
    return walk(
      { ...rest, ...merged, ...(rules.length === 0 ? {} : { 'x-kubernetes-validations': rules }) },
      inner,
      at,
    );
  }
  const out: JsonSchema = {};
  for (const [key, value] of Object.entries(node)) {
    if (KEPT.has(key) || key.startsWith('x-kubernetes-')) out[key] = value;
    else if (key === 'const') out['enum'] = [value];
    else if (key === 'properties') out[key] = properties(value, inner, at);
    else if (key === 'items') out[key] = walk(asSchema(value, `${at}/items`), inner, `${at}/items`);
    else if (key === 'additionalProperties') {
      // A schema is a map's values (z.record); true/false only say "open" or "closed" (see the header).
      if (isSchema(value)) out[key] = walk(value, inner, `${at}/additionalProperties`);
    } else if (!DROPPED.has(key)) throw new CrdSchemaError(at, `${key} has no structural form`);
  }
  if (typeof out['type'] !== 'string')
    throw new CrdSchemaError(at, 'every node of a structural schema needs a type');
  if (out['properties'] !== undefined && out['additionalProperties'] !== undefined)
    throw new CrdSchemaError(at, 'properties and additionalProperties exclude each other');
  return out;
}

function properties(value: unknown, context: Walk, at: string): JsonSchema {
  const all = asSchema(value, `${at}/properties`);
  const out: JsonSchema = {};
  for (const [name, property] of Object.entries(all))
    out[name] = walk(asSchema(property, `${at}/properties/${name}`), context, `${at}/properties/${name}`);
  return out;
}

function validationsOf(node: JsonSchema): unknown[] {
  const rules = node['x-kubernetes-validations'];
  return Array.isArray(rules) ? rules : [];
}

function asSchema(value: unknown, at: string): JsonSchema {
  if (!isSchema(value)) throw new CrdSchemaError(at, 'expected a schema object');
  return value;
}

/** `node` with its `$ref` replaced by what it points at (the node's own keys win, as JSON Schema 2019+ reads them). */
function inlineRef(
  node: JsonSchema,
  root: JsonSchema,
  at: string,
  seen: readonly string[],
): { node: JsonSchema; refs: readonly string[] } {
  const ref = node['$ref'];
  if (ref === undefined) return { node, refs: seen };
  if (typeof ref !== 'string' || !ref.startsWith('#/'))
    throw new CrdSchemaError(at, `cannot inline $ref ${JSON.stringify(ref)}`);
  // A structural schema is a finite tree: a recursive type has no CRD form.
  if (seen.includes(ref)) throw new CrdSchemaError(at, `$ref ${ref} is recursive`);
  let target: unknown = root;
  for (const part of ref.slice(2).split('/')) {
    const name = part.replaceAll('~1', '/').replaceAll('~0', '~');
    target = isSchema(target) ? target[name] : undefined;
  }
  if (!isSchema(target)) throw new CrdSchemaError(at, `$ref ${ref} points at nothing`);
  const { $ref: _ref, ...own } = node;
  return inlineRef({ ...target, ...own }, root, at, [...seen, ref]);
}
