// src/scheduler/trigger.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { MAX_TRIGGER_BODY_BYTES, TRIGGER_PATH, createTriggerEndpoint } from '../trigger.ts';
export type { AcceptedTrigger } from '../trigger.ts';
