// src/policy/schema.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { ApiSettings, DestinationInput, KeyInput, PolicyDocument, primaryDestination } from '../schema.ts';
export type { FailureSettings, KeyPolicy, Policy } from '../schema.ts';
