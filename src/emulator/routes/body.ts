// Request bodies are parsed strictly: an unknown field is a 400, so a client sending a typo
// learns about it here rather than against the real service.
import type { z } from 'zod';
import { EmulatorRequestError } from '../errors.ts';

export function parseBody<T extends z.ZodType>(schema: T, body: unknown): z.output<T> {
  const parsed = schema.safeParse(body);
  if (!parsed.success) {
    throw new EmulatorRequestError(400, 'The request body is invalid.', {
      details: {
        issues: parsed.error.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })),
      },
    });
  }
  return parsed.data;
}
