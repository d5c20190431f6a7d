// Reading the start of a response body that keyroll does not trust to be small: an alert sink's
// error answer, a Vault answer. The body is read chunk by chunk and the stream destroyed once the
// cap is reached, so a receiver streaming 700 MB costs at most the cap (plus what the kernel had
// already buffered), never the whole body in memory first (issue 12, section 2).
import type { Dispatcher } from 'undici';

export interface BodyPrefix {
  /** The first `maxBytes` bytes as UTF-8 (a character cut at the cap becomes U+FFFD). */
  text: string;
  /** Bytes kept (at most `maxBytes`). */
  bytes: number;
  /** True when the body went on past the cap and was cut (the connection is then closed). */
  truncated: boolean;
}

/**
 * Reads at most `maxBytes` of `body`, then destroys it. Errors of the stream (a reset, undici's
 * body timeout, an abort signal) reject, as they would for `body.text()`.
 */
export async function readBodyPrefix(
  body: Dispatcher.ResponseData['body'],
  maxBytes: number,
): Promise<BodyPrefix> {
  const chunks: Buffer[] = [];
  let bytes = 0;
  let truncated = false;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    const room = maxBytes - bytes;
    if (chunk.length > room) {
      chunks.push(chunk.subarray(0, room));
      bytes += room;
      truncated = true;
      break;
    }
    chunks.push(chunk);
    bytes += chunk.length;
  }
  // Leaving the loop early already ends the iterator; destroy() says so even when the cap fell on
  // a chunk boundary, and is a no-op on a body read to its end.
  if (truncated) body.destroy();
  return { text: Buffer.concat(chunks, bytes).toString('utf8'), bytes, truncated };
}
