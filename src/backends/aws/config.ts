import { z } from 'zod';
import { AllowInsecureHttp, HttpUrl } from '../../http/public/transport.ts';
import { AwsQuotas } from './quotas.ts';

export const AwsBackendConfig = z.strictObject({
  kind: z.literal('aws'),
  /** Falls back to AWS_REGION / the default chain when omitted. */
  region: z.string().min(1).optional(),
  /** Endpoint override (moto, LocalStack, VPC endpoints). */
  endpoint: HttpUrl.optional(),
  allowInsecureHttp: AllowInsecureHttp,
  /** KMS key for new secrets and versions; the account default key when omitted. */
  kmsKeyId: z.string().min(1).optional(),
  /** Create the secret on first write when it does not exist (off: a missing secret fails preflight). */
  createIfMissing: z.boolean().default(false),
  /** Extra tags for secrets keyroll creates; `managed-by: keyroll` is always added. */
  tags: z.record(z.string(), z.string()).default({}),
  timeoutMs: z.number().int().positive().default(10_000),
  /** The account's request quotas in this region (absent: AWS's documented ones): keyroll paces itself inside them. */
  quotas: AwsQuotas.optional(),
});
export type AwsBackendConfig = z.infer<typeof AwsBackendConfig>;
