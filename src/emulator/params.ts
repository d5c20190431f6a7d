// Reading path and query parameters. Fastify gives a repeated query parameter as an array; the
// spec's parameters are single values, so a repeat is a 400 rather than a silent pick.
import { EmulatorRequestError } from './errors.ts';

export type Query = Record<string, string | string[] | undefined>;

const ID = /^[A-Za-z0-9_.-]{1,128}$/;

export function singleQueryValue(query: Query, name: string): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) {
    throw new EmulatorRequestError(400, `Query parameter ${name} must be given once.`, {
      details: { parameter: name },
    });
  }
  return value;
}

/** An identifier from the path or query: letters, digits, `_`, `.`, `-`, 1 to 128 chars. */
export function requireId(value: string | undefined, name: string): string {
  if (value === undefined || !ID.test(value)) {
    throw new EmulatorRequestError(400, `${name} is not a valid identifier.`, {
      details: { parameter: name },
    });
  }
  return value;
}
