// src/alerts/shutdown.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { SHUTDOWN_WINDOW_MS, abandonDeliveriesOn } from '../shutdown.ts';
