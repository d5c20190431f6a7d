// Turns zod issues into plain sentences an operator can act on ("is required", "is not a known
// field (did you mean "schedule"?)"). Values the user wrote are never echoed here: the field
// could be a reference where someone pasted the secret itself (invariant 3). Sentences that do
// quote a value (cron, time zone, duration, names) come from our own checks, on fields that
// never hold secrets.
import { z } from 'zod';

export type DocPath = readonly (string | number)[];

/** An issue located by its path in the document; load.ts adds file and line. */
export interface PathIssue {
  path: DocPath;
  message: string;
}

/** Plain-sentence issues for a failed parse of `data` against `schema`. */
export function describeZodIssues(
  issues: readonly z.core.$ZodIssue[],
  data: unknown,
  schema: z.ZodType,
): PathIssue[] {
  const out: PathIssue[] = [];
  for (const issue of issues) {
    const path = issue.path.filter((segment) => typeof segment !== 'symbol');
    if (issue.code === 'unrecognized_keys') {
      const known = knownFields(schema, path, data);
      for (const key of issue.keys)
        out.push({ path: [...path, key], message: unknownFieldSentence(key, known) });
      continue;
    }
    out.push({ path, message: sentenceFor(issue, valueAt(data, path)) });
  }
  return out;
}

function sentenceFor(issue: z.core.$ZodIssue, value: unknown): string {
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined) return 'is required';
      if (isOwnMessage(issue.message)) return issue.message;
      return `must be ${expectedPhrase(issue.expected)}, not ${describeValue(value)}`;
    case 'invalid_union':
      if (issue.discriminator !== undefined && 'options' in issue && issue.options !== undefined) {
        const choices = issue.options.map(String).join(', ');
        return value === undefined ? `is required (one of ${choices})` : `must be one of ${choices}`;
      }
      return 'does not match any of the allowed forms';
    case 'invalid_value':
      if (isOwnMessage(issue.message)) return issue.message;
      return issue.values.length === 1
        ? `must be ${JSON.stringify(issue.values[0])}`
        : `must be one of ${issue.values.map(String).join(', ')}`;
    case 'too_small':
      if (isOwnMessage(issue.message)) return issue.message;
      if (issue.origin === 'array')
        return issue.minimum === 1 ? 'must not be empty' : `must have at least ${issue.minimum} items`;
      if (issue.origin === 'string')
        return issue.minimum === 1
          ? 'must not be empty'
          : `must be at least ${issue.minimum} characters long`;
      return issue.inclusive === false
        ? `must be greater than ${issue.minimum}`
        : `must be at least ${issue.minimum}`;
    case 'too_big':
      if (isOwnMessage(issue.message)) return issue.message;
      if (issue.origin === 'array') return `must have at most ${issue.maximum} items`;
      if (issue.origin === 'string') return `must be at most ${issue.maximum} characters long`;
      return issue.inclusive === false
        ? `must be less than ${issue.maximum}`
        : `must be at most ${issue.maximum}`;
    case 'invalid_format':
      if (isOwnMessage(issue.message)) return issue.message;
      if (issue.format === 'url') return 'must be a URL';
      return `is not a valid ${issue.format}`;
    case 'invalid_key': {
      const inner = issue.issues[0];
      return inner !== undefined && isOwnMessage(inner.message)
        ? `is not a valid name: it ${inner.message}`
        : 'is not a valid name';
    }
    case 'custom':
      return issue.message;
    case 'not_multiple_of':
      return `must be a multiple of ${issue.divisor}`;
    case 'invalid_element':
      return 'holds an invalid element';
    default:
      return 'is invalid';
  }
}

// zod's own messages start like this; ours (from `error:` options and refinements) do not.
function isOwnMessage(message: string): boolean {
  return !/^(Invalid|Too (small|big)|Unrecognized|Expected)/.test(message);
}

function expectedPhrase(expected: string): string {
  switch (expected) {
    case 'string':
      return 'text';
    case 'number':
      return 'a number';
    case 'int':
      return 'a whole number';
    case 'boolean':
      return 'true or false';
    case 'array':
      return 'a list';
    case 'object':
    case 'record':
      return 'a mapping (field: value)';
    default:
      return `a ${expected}`;
  }
}

function describeValue(value: unknown): string {
  if (value === null) return 'empty (null)';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'string') return 'text';
  if (typeof value === 'number') return Number.isInteger(value) ? 'a whole number' : 'a fractional number';
  if (typeof value === 'boolean') return 'true/false';
  if (typeof value === 'object') return 'a mapping';
  return typeof value;
}

function unknownFieldSentence(key: string, known: readonly string[]): string {
  const near = known.filter((candidate) => editDistance(candidate.toLowerCase(), key.toLowerCase()) <= 2);
  if (near.length > 0)
    return `is not a known field (did you mean ${near.map((name) => JSON.stringify(name)).join(' or ')}?)`;
  if (known.length > 0) return `is not a known field (known here: ${known.join(', ')})`;
  return 'is not a known field';
}

/** The value at `path` inside parsed YAML/JSON data. */
export function valueAt(data: unknown, path: DocPath): unknown {
  let node = data;
  for (const segment of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string | number, unknown>)[segment];
  }
  return node;
}

/** Field names the object schema at `path` accepts (for "did you mean"). */
function knownFields(root: z.ZodType, path: DocPath, data: unknown): string[] {
  let schema: z.ZodType | undefined = root;
  for (let depth = 0; depth <= path.length && schema !== undefined; depth += 1) {
    schema = unwrap(schema);
    if (schema instanceof z.ZodDiscriminatedUnion) {
      const discriminator = (schema.def as { discriminator: string }).discriminator;
      const wanted = valueAt(data, [...path.slice(0, depth), discriminator]);
      schema = (schema.options as z.ZodType[]).find(
        (option) =>
          option instanceof z.ZodObject &&
          (option.shape as Record<string, z.ZodType>)[discriminator]?.safeParse(wanted).success === true,
      );
      if (schema === undefined) return [];
    }
    if (depth === path.length) break;
    const segment = path[depth];
    if (schema instanceof z.ZodObject)
      schema = (schema.shape as Record<string, z.ZodType | undefined>)[String(segment)];
    else if (schema instanceof z.ZodArray) schema = schema.element as z.ZodType;
    else if (schema instanceof z.ZodRecord) schema = schema.valueType as z.ZodType;
    else return [];
  }
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : [];
}

function unwrap(schema: z.ZodType): z.ZodType {
  let current = schema;
  while (
    current instanceof z.ZodOptional ||
    current instanceof z.ZodNullable ||
    current instanceof z.ZodDefault ||
    current instanceof z.ZodPrefault
  ) {
    current = current.unwrap() as z.ZodType;
  }
  return current;
}

function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
    }
    previous = current;
  }
  return previous[b.length] ?? 0;
}
