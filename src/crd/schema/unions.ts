// A discriminated union (zod's z.discriminatedUnion: `oneOf` of objects, each with a one-value
// enum at the same property) as one structural object: every branch's properties side by side,
// the discriminator's enum listing every value, and CEL rules that keep each value's shape:
//   - a property only some branches have is allowed only for their values;
//   - a property some branch requires (and not all) is required for that branch's value.
// A property several branches give different object schemas (aws and vault `quotas`) is merged
// the same way, one level down. Each rule names its field (`fieldPath`), so the API server's
// refusal says which field is wrong.
import { celField, celString } from './cel.ts';
import { CrdSchemaError, isSchema, type JsonSchema } from './errors.ts';

/** One branch's schema for a property, with the discriminator value of that branch. */
interface Owned {
  value: string;
  schema: JsonSchema;
}

interface Merge {
  /** `self.kind` (the discriminator as CEL reaches it). */
  discriminator: string;
  /** The discriminator's name, for messages. */
  name: string;
  rules: JsonSchema[];
}

/** The one object a union of structural object schemas becomes. */
export function mergeUnion(branches: readonly JsonSchema[], at: string): JsonSchema {
  const discriminator = findDiscriminator(branches, at);
  const owned = branches.map((schema): Owned => {
    if (Array.isArray(schema['x-kubernetes-validations']))
      throw new CrdSchemaError(at, 'a union branch with CEL rules of its own is not supported');
    const only = ((schema['properties'] as JsonSchema)[discriminator] as JsonSchema)['enum'] as unknown[];
    return { value: String(only[0]), schema };
  });
  const merge: Merge = { discriminator: `self.${celField(discriminator)}`, name: discriminator, rules: [] };
  const merged = mergeObjects(owned, [], merge, at);
  const properties = merged['properties'] as JsonSchema;
  properties[discriminator] = {
    ...(properties[discriminator] as JsonSchema),
    enum: owned.map((branch) => branch.value),
  };
  return { ...merged, ...(merge.rules.length === 0 ? {} : { 'x-kubernetes-validations': merge.rules }) };
}

/** Objects of several branches as one, with rules for what only some of them have or require. */
function mergeObjects(
  owned: readonly Owned[],
  path: readonly string[],
  merge: Merge,
  at: string,
): JsonSchema {
  const all = owned.map((branch) => branch.value);
  const names = [...new Set(owned.flatMap((branch) => Object.keys(propertiesOf(branch.schema))))];
  const properties: JsonSchema = {};
  const present = (name: string): string => presentPath([...path, name]);
  const fieldPath = (name: string): string => `.${[...path, name].join('.')}`;
  for (const name of names) {
    const holders = owned.flatMap((branch) => {
      const schema = propertiesOf(branch.schema)[name];
      return isSchema(schema) ? [{ value: branch.value, schema }] : [];
    });
    // The discriminator's enum is the list of every value (set by mergeUnion).
    const discriminator = path.length === 0 && name === merge.name;
    properties[name] = discriminator
      ? (holders[0]?.schema ?? {})
      : mergeProperty(holders, [...path, name], merge, `${at}/properties/${name}`);
    const values = holders.map((holder) => holder.value);
    if (values.length < all.length)
      merge.rules.push({
        rule: `!(${present(name)}) || ${merge.discriminator} in [${values.map(celString).join(', ')}]`,
        message: `${fieldPath(name).slice(1)} applies only to ${merge.name} ${values.join(', ')}`,
        fieldPath: fieldPath(name),
      });
  }
  const requiredBy = (branch: Owned): string[] => (branch.schema['required'] as string[] | undefined) ?? [];
  const required = names.filter((name) => owned.every((branch) => requiredBy(branch).includes(name)));
  const parent = path.length === 0 ? '' : `!(${presentPath(path)}) || `;
  for (const branch of owned)
    for (const name of requiredBy(branch))
      if (!required.includes(name))
        merge.rules.push({
          rule: `${parent}${merge.discriminator} != ${celString(branch.value)} || has(self.${[...path, name].map(celField).join('.')})`,
          message: `${fieldPath(name).slice(1)} is required for ${merge.name} ${branch.value}`,
          fieldPath: fieldPath(name),
        });
  const [first] = owned;
  const { properties: _properties, required: _required, ...rest } = first?.schema ?? {};
  return { ...rest, type: 'object', properties, ...(required.length === 0 ? {} : { required }) };
}

/** A property several branches share: one schema when they agree (descriptions aside), else merged objects. */
function mergeProperty(
  holders: readonly Owned[],
  path: readonly string[],
  merge: Merge,
  at: string,
): JsonSchema {
  const [first, ...others] = holders;
  if (first === undefined) throw new CrdSchemaError(at, 'no branch has this property');
  const shape = ({ description: _description, ...rest }: JsonSchema): string => JSON.stringify(rest);
  if (others.every((other) => shape(other.schema) === shape(first.schema))) return first.schema;
  if (holders.every((holder) => holder.schema['type'] === 'object' && isSchema(holder.schema['properties'])))
    return mergeObjects(holders, path, merge, at);
  throw new CrdSchemaError(at, 'union branches give this property different schemas');
}

/** `has()` of every object on the way: a rule about quotas.maxWaitMs holds when quotas is absent. */
function presentPath(path: readonly string[]): string {
  return path
    .map(
      (_, i) =>
        `has(self.${path
          .slice(0, i + 1)
          .map(celField)
          .join('.')})`,
    )
    .join(' && ');
}

function propertiesOf(schema: JsonSchema): JsonSchema {
  const properties = schema['properties'];
  return isSchema(properties) ? properties : {};
}

/** The property every branch requires as a one-value enum. */
function findDiscriminator(branches: readonly JsonSchema[], at: string): string {
  if (branches.length === 0) throw new CrdSchemaError(at, 'an empty union has no structural form');
  if (!branches.every((branch) => branch['type'] === 'object' && isSchema(branch['properties'])))
    throw new CrdSchemaError(at, 'only unions of objects (zod discriminated unions) have a structural form');
  const requires = (branch: JsonSchema, name: string): boolean => {
    const property = propertiesOf(branch)[name];
    const only = isSchema(property) ? property['enum'] : undefined;
    const required = branch['required'];
    return Array.isArray(required) && required.includes(name) && Array.isArray(only) && only.length === 1;
  };
  const [first] = branches;
  const discriminator = Object.keys(propertiesOf(first ?? {})).find((name) =>
    branches.every((branch) => requires(branch, name)),
  );
  if (discriminator === undefined)
    throw new CrdSchemaError(at, 'a union of objects needs a discriminator property');
  return discriminator;
}
