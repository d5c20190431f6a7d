// src/inbound/answers.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { refuse, singleHeader } from '../answers.ts';
export type { HttpAnswer, InboundRequest, Refusal } from '../answers.ts';
