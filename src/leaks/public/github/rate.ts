// src/leaks/github/rate.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { GithubRateBudget } from '../../github/rate.ts';
