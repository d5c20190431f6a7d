// src/audit/sanitize.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export {
  pinSecretValue,
  registerSecretValue,
  sanitizeText,
  sanitizeValue,
  truncateSanitized,
  withSecretScope,
} from '../sanitize.ts';
