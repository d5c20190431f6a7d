// src/api/rate-limiter.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { RateLimiter } from '../rate-limiter.ts';
