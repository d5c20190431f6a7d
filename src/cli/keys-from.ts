// Where a command's keys come from (issue 31): `file`, the keys of --policy, or `kubernetes`, the
// keyroll.io objects, with --policy holding the shared settings only. One set of flags and one
// reading of them for `keyroll daemon` and `keyroll status`, so both name keyroll's namespace
// and reach the API server the same way and show the same keys.
import { readFile } from 'node:fs/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Command } from 'commander';
import { UsageError } from '../errors.ts';

export interface KeysFromFlags {
  keysFrom: string;
  keyrollNamespace?: string;
}

/** What --keys-from kubernetes needs: keyroll's client configuration and its own namespace. */
export interface KeysFromKubernetes {
  kubeConfig: KubeConfig;
  namespace: string;
}

/** Where a pod's service account names its namespace (the chart passes POD_NAMESPACE too). */
const POD_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** The namespace the pod's service account names; undefined outside a pod (or when unreadable). */
export async function serviceAccountNamespace(file = POD_NAMESPACE_FILE): Promise<string | undefined> {
  return readFile(file, 'utf8').then(
    (text) => text.trim(),
    () => undefined,
  );
}

/** Adds --keys-from and --keyroll-namespace (defaults from env KEYROLL_KEYS_FROM, POD_NAMESPACE). */
export function addKeysFromOptions(command: Command, env: NodeJS.ProcessEnv = process.env): Command {
  return command
    .option(
      '--keys-from <source>',
      'file: the keys of --policy; kubernetes: keyroll.io objects (RotatedKey ...), with --policy holding the shared settings only; env KEYROLL_KEYS_FROM',
      env.KEYROLL_KEYS_FROM ?? 'file',
    )
    .option(
      '--keyroll-namespace <ns>',
      "with --keys-from kubernetes: keyroll's own namespace, whose KeyStores are the platform team's; default env POD_NAMESPACE, else the pod's own namespace",
      env.POD_NAMESPACE,
    );
}

/**
 * The settings of --keys-from kubernetes; undefined with --keys-from file. Throws UsageError (exit
 * 2) for another source, without keyroll's namespace, or without a client configuration.
 */
export async function keysFromOf(
  flags: KeysFromFlags,
  sources: { namespaceFile?: string } = {},
): Promise<KeysFromKubernetes | undefined> {
  if (flags.keysFrom === 'file') return undefined;
  if (flags.keysFrom !== 'kubernetes')
    throw new UsageError(`--keys-from ${JSON.stringify(flags.keysFrom)} must be file or kubernetes`);
  const flag = flags.keyrollNamespace;
  const namespace =
    flag !== undefined && flag !== '' ? flag : await serviceAccountNamespace(sources.namespaceFile);
  if (namespace === undefined || namespace === '')
    throw new UsageError(
      "--keys-from kubernetes needs keyroll's own namespace: --keyroll-namespace or env POD_NAMESPACE",
    );
  const { loadKubeConfig } = await import('../consumers/public/kubernetes/node-client.ts');
  try {
    return { kubeConfig: loadKubeConfig({}), namespace };
  } catch (error) {
    throw new UsageError(
      `--keys-from kubernetes: ${error instanceof Error ? error.message : String(error)}`,
      {
        cause: error,
      },
    );
  }
}
