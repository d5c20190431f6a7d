// The JSON Schema editors use to complete and check policy files (config/policy.schema.json).
// Generated from the same zod schema keyroll validates with, for the input side (fields with a
// default are optional). Semantic rules (references, cron, durations) are keyroll's alone.
import { z } from 'zod';
import { PolicyDocument } from './schema.ts';
import { SharedSettingsFile } from './settings-file.ts';

/** Draft-07: the draft yaml-language-server and most editors support fully. */
export function policyJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(PolicyDocument, { io: 'input', target: 'draft-7' });
}

/** The exact text of config/policy.schema.json. */
export function policyJsonSchemaText(): string {
  return `${JSON.stringify(policyJsonSchema(), null, 2)}\n`;
}

/**
 * config/daemon-settings.schema.json: the daemon's policy file with --keys-from kubernetes (the
 * settings every key shares; keys, backends and the API are keyroll.io objects then).
 */
export function settingsJsonSchemaText(): string {
  return `${JSON.stringify(z.toJSONSchema(SharedSettingsFile, { io: 'input', target: 'draft-7' }), null, 2)}\n`;
}
