import { describe, expect, it } from 'vitest';
import { Secret } from '../../src/audit/secret.ts';
import {
  extractSecret,
  parseStoredValue,
  renderMap,
  renderText,
  renderValue,
} from '../../src/backends/render.ts';
import type { SecretRecord, ValueShape } from '../../src/backends/types.ts';

const record: SecretRecord = {
  secret: new Secret('sk_live_render_test_0123456789'),
  keyId: 'key_1',
  organizationId: 'org_1',
  rotationId: 'rot_1',
  rotatedAt: '2030-01-01T00:00:00.000Z',
};
const raw: ValueShape = { format: 'raw', secretField: 'apiKey', fields: [] };
const json: ValueShape = {
  format: 'json',
  secretField: 'apiKey',
  fields: ['keyId', 'organizationId', 'rotatedAt', 'rotationId'],
};

describe('renderValue', () => {
  it('renders a raw shape as the bare secret', () => {
    expect(renderValue(raw, record)).toBe('sk_live_render_test_0123456789');
  });

  it('renders a json shape with the secret first and only the chosen fields', () => {
    expect(renderValue({ ...json, fields: ['keyId'] }, record)).toEqual({
      apiKey: 'sk_live_render_test_0123456789',
      keyId: 'key_1',
    });
  });

  it('renders every field in a json shape that asks for all of them', () => {
    expect(renderText(json, record)).toBe(
      JSON.stringify({
        apiKey: 'sk_live_render_test_0123456789',
        keyId: 'key_1',
        organizationId: 'org_1',
        rotatedAt: '2030-01-01T00:00:00.000Z',
        rotationId: 'rot_1',
      }),
    );
  });

  it('renders a raw shape as a one-field map for map-only stores (Vault)', () => {
    expect(renderMap({ ...raw, fields: ['keyId'] }, record)).toEqual({
      apiKey: 'sk_live_render_test_0123456789',
    });
  });
});

describe('parseStoredValue', () => {
  it('reads a raw string back', () => {
    expect(extractSecret(raw, 'sk_live_render_test_0123456789')?.equals(record.secret)).toBe(true);
  });

  it('reads a json string back with its rotation id', () => {
    const parsed = parseStoredValue(json, renderText(json, record));
    expect(parsed?.secret.equals(record.secret)).toBe(true);
    expect(parsed?.rotationId).toBe('rot_1');
  });

  it('reads the key id a json value names (which slot a kept value belongs to), and none from a raw one', () => {
    expect(parseStoredValue(json, renderText(json, record))?.keyId).toBe('key_1');
    expect(parseStoredValue(raw, 'sk_live_render_test_0123456789')).not.toHaveProperty('keyId');
  });

  it('reads a map back whatever the format (Vault raw shape)', () => {
    expect(extractSecret(raw, { apiKey: 'sk_live_render_test_0123456789' })?.equals(record.secret)).toBe(
      true,
    );
  });

  it.each([
    ['an empty raw value', raw, ''],
    ['text that is not json', json, 'not json {'],
    ['a json array', json, '["sk_live_render_test_0123456789"]'],
    ['json without the secret field', json, '{"other":"x"}'],
    ['a non-string secret field', json, '{"apiKey":42}'],
    ['an empty secret field', json, '{"apiKey":""}'],
  ] as const)('finds no secret in %s', (_name, shape, stored) => {
    expect(parseStoredValue(shape, stored)).toBeUndefined();
  });

  it('ignores a non-string rotation id', () => {
    expect(
      parseStoredValue(json, { apiKey: 'sk_live_render_test_0123456789', rotationId: 7 })?.rotationId,
    ).toBeUndefined();
  });
});
