// Opaque list cursors. A cursor names the last project of the previous page and the filter it
// was issued for, signed with a per-process key so a forged, edited or foreign cursor is a 400
// rather than a silently different page. Cursors from an earlier emulator process are invalid.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export interface CursorPosition {
  /** projectId of the last item already returned. */
  after: string;
  /** The organizationId filter the cursor belongs to, or null for "all my organizations". */
  organizationId: string | null;
}

export class CursorCodec {
  readonly #key = randomBytes(32);

  encode(position: CursorPosition): string {
    const payload = Buffer.from(JSON.stringify([position.after, position.organizationId]), 'utf8').toString(
      'base64url',
    );
    return `${payload}.${this.#sign(payload)}`;
  }

  /** The position, or undefined when the cursor was not issued by this emulator. */
  decode(cursor: string): CursorPosition | undefined {
    const [payload, signature, extra] = cursor.split('.');
    if (payload === undefined || signature === undefined || extra !== undefined) return undefined;
    const expected = Buffer.from(this.#sign(payload));
    const given = Buffer.from(signature);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    } catch {
      return undefined;
    }
    if (!Array.isArray(parsed) || parsed.length !== 2) return undefined;
    const [after, organizationId] = parsed as unknown[];
    if (typeof after !== 'string' || (organizationId !== null && typeof organizationId !== 'string'))
      return undefined;
    return { after, organizationId };
  }

  #sign(payload: string): string {
    return createHmac('sha256', this.#key).update(payload).digest('base64url').slice(0, 22);
  }
}
