// How a secret is laid out at its destination, shared by every backend so one policy shape
// means the same stored bytes everywhere: `raw` is the secret string alone; `json` is an
// object with the secret under `secretField` plus the chosen `fields`. Vault, whose data is
// always a map, stores a raw shape as `{ [secretField]: secret }` (see `renderMap`).
// Everything returned here contains the plaintext: hand it only to a backend write.
import { Secret } from '../audit/public/secret.ts';
import type { SecretRecord, StoredField, ValueShape } from './types.ts';

/** The stored value for `record`: a string for `raw`, an object for `json`. */
export function renderValue(shape: ValueShape, record: SecretRecord): string | Record<string, string> {
  if (shape.format === 'raw') return record.secret.reveal();
  return renderMap(shape, record);
}

/** The stored value as text (AWS SecretString, file content): raw as is, json serialized. */
export function renderText(shape: ValueShape, record: SecretRecord): string {
  const value = renderValue(shape, record);
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** The stored value as a map (Vault KV data): json as rendered, raw as `{ [secretField]: secret }`. */
export function renderMap(shape: ValueShape, record: SecretRecord): Record<string, string> {
  const map: Record<string, string> = { [shape.secretField]: record.secret.reveal() };
  if (shape.format === 'json') {
    for (const field of shape.fields) map[field] = fieldValue(record, field);
  }
  return map;
}

function fieldValue(record: SecretRecord, field: StoredField): string {
  switch (field) {
    case 'keyId':
      return record.keyId;
    case 'organizationId':
      return record.organizationId;
    case 'rotatedAt':
      return record.rotatedAt;
    case 'rotationId':
      return record.rotationId;
  }
}

/** What can be read back from a stored value. */
export interface ParsedValue {
  secret: Secret;
  /** Present when the value carries a `rotationId` field (json shapes that store it). */
  rotationId?: string;
  /** Present when the value carries a `keyId` field (json shapes that store it; the default). */
  keyId?: string;
}

/**
 * Reads a stored value back: a string (file content, AWS SecretString) or a map (Vault data).
 * Undefined when the secret is not there (empty, not JSON for a json shape, field missing).
 * A JSON parse error is deliberately dropped, never rethrown: its message can quote the text.
 */
export function parseStoredValue(
  shape: ValueShape,
  stored: string | Record<string, unknown>,
): ParsedValue | undefined {
  let map: Record<string, unknown>;
  if (typeof stored === 'string') {
    if (shape.format === 'raw') return stored === '' ? undefined : { secret: new Secret(stored) };
    const parsed = parseJsonObject(stored);
    if (parsed === undefined) return undefined;
    map = parsed;
  } else {
    map = stored;
  }
  const value = map[shape.secretField];
  if (typeof value !== 'string' || value === '') return undefined;
  const { rotationId, keyId } = map;
  return {
    secret: new Secret(value),
    ...(typeof rotationId === 'string' ? { rotationId } : {}),
    ...(typeof keyId === 'string' && keyId !== '' ? { keyId } : {}),
  };
}

/** The secret of a stored value, or undefined when it is not there. */
export function extractSecret(
  shape: ValueShape,
  stored: string | Record<string, unknown>,
): Secret | undefined {
  return parseStoredValue(shape, stored)?.secret;
}

function parseJsonObject(text: string): Record<string, unknown> | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  return parsed as Record<string, unknown>;
}
