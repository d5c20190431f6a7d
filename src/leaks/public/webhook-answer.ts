// src/leaks/webhook-answer.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { MAX_LEAK_WEBHOOK_BYTES } from '../webhook-answer.ts';
