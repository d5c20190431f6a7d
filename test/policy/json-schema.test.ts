import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { policyJsonSchemaText, settingsJsonSchemaText } from '../../src/policy/json-schema.ts';

describe('config/policy.schema.json', () => {
  it('is what the zod schema generates now (run `npm run schema:policy` after changing src/policy/schema.ts)', async () => {
    const committed = await readFile(new URL('../../config/policy.schema.json', import.meta.url), 'utf8');
    expect(committed).toBe(policyJsonSchemaText());
  });

  it('is strict like the zod schema: unknown top-level and key fields are refused', () => {
    const schema = JSON.parse(policyJsonSchemaText()) as {
      additionalProperties: unknown;
      required: string[];
      properties: { keys: { items: { additionalProperties: unknown; required: string[] } } };
    };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(['version', 'api', 'backends', 'keys']);
    expect(schema.properties.keys.items.additionalProperties).toBe(false);
    expect(schema.properties.keys.items.required).toEqual(['id', 'organization', 'destinations']);
  });
});

describe('config/daemon-settings.schema.json', () => {
  it('is what the zod schema generates now (run `npm run schema:policy` after changing src/policy/settings-file.ts)', async () => {
    const committed = await readFile(
      new URL('../../config/daemon-settings.schema.json', import.meta.url),
      'utf8',
    );
    expect(committed).toBe(settingsJsonSchemaText());
  });

  it('holds the shared settings only: keys, backends and api are refused (they are keyroll.io objects)', () => {
    const schema = JSON.parse(settingsJsonSchemaText()) as {
      additionalProperties: unknown;
      required: string[];
      properties: Record<string, unknown>;
    };
    expect(schema.additionalProperties).toBe(false);
    expect(schema.required).toEqual(['version']);
    expect(Object.keys(schema.properties).sort()).toEqual(
      ['$schema', 'alerts', 'consumers', 'escrow', 'intake', 'keyApi', 'version'].sort(),
    );
  });
});
