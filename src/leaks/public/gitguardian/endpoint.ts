// src/leaks/gitguardian/endpoint.ts as other folders of src/ see it (docs/layout.md, "Entry files").
export { GITGUARDIAN_LEAK_PATH, createGitguardianEndpoint } from '../../gitguardian/endpoint.ts';
