// src/leaks/github/endpoint.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { GITHUB_LEAK_PATH, createGithubEndpoint, createGithubGate } from '../../github/endpoint.ts';
export type { GithubIntakeRuntime, LeakEndpointOptions } from '../../github/endpoint.ts';
