// One read of a secret's current value outside any backend: the rotation function's own API
// credential (lambda/api-credential.ts). Other folders get this one call, not the client class:
// the class's turns, reservations and writes are the backend's to use (issue 29 §4, AWS's
// request-saving decisions live inside backends/aws/).
import { SecretsManagerCalls } from './client.ts';
import { awsAccessFromEnv } from './index.ts';

export interface CurrentValueRead {
  /** The secret's ARN or name. */
  secretId: string;
  /** Who reads, as errors and the request pacing name it (there is no policy backend of that name). */
  readerName: string;
  endpoint?: string | undefined;
  /** The region to ask; the environment's (awsAccessFromEnv) when undefined. */
  region?: string | undefined;
  timeoutMs: number;
  /** Static AWS keys in it are used when it is not process.env (tests); else the SDK's default chain. */
  env: NodeJS.ProcessEnv;
}

/**
 * One GetSecretValue at AWSCURRENT: the SecretString, undefined when the version has none. A
 * failure is the client's BackendError, which keeps no AWS message or cause (it could echo a value).
 */
export async function readCurrentSecretString(read: CurrentValueRead): Promise<string | undefined> {
  const access = awsAccessFromEnv(read.env);
  const calls = new SecretsManagerCalls({
    backendName: read.readerName,
    endpoint: read.endpoint,
    region: read.region ?? access.region,
    timeoutMs: read.timeoutMs,
    credentials: access.credentials,
  });
  try {
    return (await calls.getSecretValue('read', { SecretId: read.secretId, VersionStage: 'AWSCURRENT' }))
      .SecretString;
  } finally {
    await calls.close();
  }
}
