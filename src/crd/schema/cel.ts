// Writing CEL for the API server's `x-kubernetes-validations`: a property whose name is a CEL
// reserved word is reached as `__name__` (Kubernetes' escaping rules), and strings are quoted
// as CEL string literals.
import { CrdSchemaError } from './errors.ts';

// https://kubernetes.io/docs/reference/using-api/cel/#escaping
const RESERVED = new Set([
  'true',
  'false',
  'null',
  'in',
  'as',
  'break',
  'const',
  'continue',
  'else',
  'for',
  'function',
  'if',
  'import',
  'let',
  'loop',
  'package',
  'namespace',
  'return',
  'var',
  'void',
  'while',
]);

/** The name CEL reaches property `name` by. */
export function celField(name: string): string {
  if (!/^[A-Za-z][A-Za-z0-9]*$/.test(name))
    throw new CrdSchemaError(
      '',
      `property ${JSON.stringify(name)} needs CEL escaping this generator does not do`,
    );
  return RESERVED.has(name) ? `__${name}__` : name;
}

/** `text` as a CEL string literal. */
export function celString(text: string): string {
  return `'${text.replaceAll('\\', '\\\\').replaceAll("'", "\\'")}'`;
}
