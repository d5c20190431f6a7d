// The generator's one error: a zod schema that has no structural CRD form (a developer's
// mistake, met by `npm run schema:crds` and the unit tests, never by a running keyroll).
import { KeyrollError } from '../../errors.ts';

export type JsonSchema = { [key: string]: unknown };

export class CrdSchemaError extends KeyrollError {
  override name = 'CrdSchemaError';
  /** Where in the schema, as a JSON pointer. */
  readonly at: string;
  constructor(at: string, message: string) {
    super('KR_CRD_SCHEMA', `${at || '/'}: ${message}`);
    this.at = at;
  }
}

export function isSchema(value: unknown): value is JsonSchema {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
