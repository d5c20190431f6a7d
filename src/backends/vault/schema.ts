// The parts of Vault / OpenBao answers keyroll reads. Tolerant parsing (unknown fields are
// allowed and dropped): the server is third-party and adds fields between releases.
import { z } from 'zod';

/** `{ "errors": [...] }`, the body of every non-2xx answer. */
export const VaultErrorBody = z.object({ errors: z.array(z.string()).optional() });

const CustomMetadata = z.record(z.string(), z.string()).nullable().optional();

/** Metadata of one version, as returned by a data read or write. */
export const KvVersionMetadata = z.object({
  version: z.number().int().nonnegative(),
  created_time: z.string().optional(),
  deletion_time: z.string().optional(),
  destroyed: z.boolean().optional(),
  custom_metadata: CustomMetadata,
});

/** GET {mount}/data/{path}; on 404 of a deleted version, `data.data` is null. */
export const KvReadResponse = z.object({
  data: z.object({
    data: z.record(z.string(), z.unknown()).nullable(),
    metadata: KvVersionMetadata,
  }),
});

/** POST {mount}/data/{path} */
export const KvWriteResponse = z.object({ data: KvVersionMetadata });

/** GET {mount}/metadata/{path} */
export const KvMetadataResponse = z.object({
  data: z.object({
    current_version: z.number().int().nonnegative(),
    /** OpenBao only: the metadata's own version, the check-and-set value of a metadata write. */
    current_metadata_version: z.number().int().nonnegative().optional(),
    custom_metadata: CustomMetadata,
    versions: z
      .record(
        z.string(),
        z.object({ deletion_time: z.string().optional(), destroyed: z.boolean().optional() }),
      )
      .optional(),
  }),
});

/** The `auth` block of a login or renew-self answer. */
export const VaultAuthResponse = z.object({
  auth: z.object({
    client_token: z.string().min(1),
    lease_duration: z.number().nonnegative(),
    renewable: z.boolean(),
    policies: z.array(z.string()).nullable().optional(),
  }),
});

/** GET auth/token/lookup-self */
export const TokenLookupResponse = z.object({
  data: z.object({
    ttl: z.number().nonnegative(),
    renewable: z.boolean().optional(),
    policies: z.array(z.string()).nullable().optional(),
  }),
});

/** POST sys/capabilities-self: one array of capabilities per requested path, under `data`. */
export const CapabilitiesResponse = z.object({
  data: z.record(z.string(), z.unknown()),
});
