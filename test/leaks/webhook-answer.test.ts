// How a leak intake endpoint turns a body that is not JSON, or not its payload, into 'invalid-body'.
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { parseBody } from '../../src/leaks/webhook-answer.ts';

describe('parseBody', () => {
  const Payload = z.object({ action: z.string() });

  it('returns the parsed payload, or undefined for a body that is not JSON or not the payload', () => {
    expect(parseBody(Buffer.from('{"action":"created","extra":1}'), Payload)).toEqual({ action: 'created' });
    expect(parseBody(Buffer.from('{"action":'), Payload)).toBeUndefined();
    expect(parseBody(Buffer.from('{"action":7}'), Payload)).toBeUndefined();
  });
});
