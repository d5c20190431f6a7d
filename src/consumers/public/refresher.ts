// src/consumers/refresher.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export type { ConsumerRefresher } from '../refresher.ts';
