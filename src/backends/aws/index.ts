// The AWS Secrets Manager backend's factory, as the registry loads it, and the credential lookup
// it does for the class (backend.ts; importers of the class import it from there). Importing this
// module does not load the AWS SDK; the first call that needs AWS does (see client.ts).
import type { BackendFactory } from '../types.ts';
import { AwsBackend } from './backend.ts';
import type { AwsStaticCredentials } from './client.ts';

/**
 * Static keys and region from `deps.env` when the caller passed an environment that carries
 * them (tests, a process that scopes its environment); otherwise undefined, and the SDK's
 * default chain finds credentials itself: env, web identity (IRSA in Kubernetes), profile,
 * container or instance role. The policy never holds AWS credentials.
 */
export function awsAccessFromEnv(env: NodeJS.ProcessEnv | undefined): {
  credentials?: AwsStaticCredentials;
  region?: string;
} {
  if (env === undefined || env === process.env) return {};
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  const sessionToken = env.AWS_SESSION_TOKEN;
  const region = env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  return {
    ...(accessKeyId && secretAccessKey
      ? { credentials: { accessKeyId, secretAccessKey, ...(sessionToken ? { sessionToken } : {}) } }
      : {}),
    ...(region ? { region } : {}),
  };
}

export const createAwsBackend: BackendFactory<'aws'> = (name, config, deps) => {
  const { credentials, region } = awsAccessFromEnv(deps.env);
  return new AwsBackend(name, config, {
    now: deps.now ?? (() => new Date()),
    credentials,
    region,
    ...(deps.quota ? { quota: deps.quota } : {}),
  });
};
