// src/inbound/signature.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export {
  MIN_SIGNING_KEY_BYTES,
  hmacSha256,
  sameBytes,
  sha256Header,
  sha256HeaderBytes,
  signingKeyTooShort,
} from '../signature.ts';
