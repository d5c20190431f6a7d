// AWS SDK spans through OpenTelemetry's maintained instrumentation (@opentelemetry/instrumentation-
// aws-sdk), applied by hand. The instrumentation normally patches the SDK's client class when
// Node's require() loads it (require-in-the-middle); in the bundle the image runs (scripts/build.ts)
// nothing is loaded through require(), so that hook never fires. Every SDK client's `send` lives on
// one class, @smithy/core's Client, which the Secrets Manager package exports as `__Client`:
// keyroll hands that class to the instrumentation's own patch, the same one the hook would apply,
// the same way from the sources and from the bundle. The instrumentation is never enabled, so it
// registers no module hooks of its own.
import { AwsInstrumentation } from '@opentelemetry/instrumentation-aws-sdk';
import type { TracerProvider } from '@opentelemetry/api';

type Sdk = typeof import('@aws-sdk/client-secrets-manager');

/** The SDK's exports, from the sources (named exports) or the bundle (a CommonJS chunk: only `default`). */
function sdkExports(loaded: Sdk | { default: Sdk }): Sdk {
  return 'SecretsManagerClient' in loaded ? loaded : loaded.default;
}

/** The SDK definition whose patch wraps `Client.prototype.send` (the one for @smithy/smithy-client). */
const CLIENT_MODULE = '@smithy/smithy-client';

/** Patches the AWS SDK's clients so each call is a span; returns the undo (tracing stops). */
export async function instrumentAwsSdk(provider: TracerProvider): Promise<() => void> {
  const instrumentation = new AwsInstrumentation({ enabled: false, suppressInternalInstrumentation: true });
  instrumentation.setTracerProvider(provider);
  const definition = instrumentation
    .getModuleDefinitions()
    .find((candidate) => candidate.name === CLIENT_MODULE);
  if (definition?.patch === undefined || definition.unpatch === undefined)
    throw new Error(`@opentelemetry/instrumentation-aws-sdk no longer patches ${CLIENT_MODULE}`);
  const sdk = sdkExports(await import('@aws-sdk/client-secrets-manager'));
  const moduleExports = { Client: sdk.__Client };
  const { patch, unpatch } = definition;
  patch(moduleExports);
  return () => {
    unpatch(moduleExports);
  };
}
