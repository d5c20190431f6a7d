import { z } from 'zod';

export const FileBackendConfig = z.strictObject({
  kind: z.literal('file'),
  /** Directory the destination paths are relative to; created (0700) when missing. */
  directory: z.string().min(1),
});
export type FileBackendConfig = z.infer<typeof FileBackendConfig>;
