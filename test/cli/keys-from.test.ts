// --keys-from and --keyroll-namespace (src/cli/keys-from.ts): one set of flags and one reading of
// them for `keyroll daemon` and `keyroll status` (issue 31 §5), so both reach the same objects.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Command } from 'commander';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { registerDaemonCommand } from '../../src/cli/daemon.ts';
import { addKeysFromOptions, keysFromOf } from '../../src/cli/keys-from.ts';
import { registerStatusCommand } from '../../src/cli/status.ts';
import { UsageError } from '../../src/errors.ts';
import { useTempDir } from '../support/temp-dir.ts';
import { spawnCli } from './harness.ts';

const temp = useTempDir('keyroll-keys-from-');
afterEach(() => {
  vi.unstubAllEnvs();
});

const KUBECONFIG = `apiVersion: v1
kind: Config
clusters: [{ name: c, cluster: { server: 'https://127.0.0.1:6443' } }]
users: [{ name: u, user: { token: not-a-real-token } }]
contexts: [{ name: x, context: { cluster: c, user: u } }]
current-context: x
`;

/** The client configuration loadKubeConfig finds: a kubeconfig in KUBECONFIG, not in a pod. */
async function useKubeconfig(text: string): Promise<void> {
  const file = join(temp.path(), 'kubeconfig');
  await writeFile(file, text);
  vi.stubEnv('KUBECONFIG', file);
  vi.stubEnv('KUBERNETES_SERVICE_HOST', '');
  vi.stubEnv('HOME', temp.path());
}

function usageError(promise: Promise<unknown>): Promise<UsageError> {
  return promise.then(
    () => {
      throw new Error('expected a UsageError');
    },
    (error: unknown) => {
      expect(error).toBeInstanceOf(UsageError);
      return error as UsageError;
    },
  );
}

describe('keysFromOf', () => {
  it('file (the default) is the policy file: nothing of Kubernetes is read', async () => {
    expect(await keysFromOf({ keysFrom: 'file' }, { namespaceFile: join(temp.path(), 'absent') })).toBe(
      undefined,
    );
  });

  it('refuses a source other than file or kubernetes (KR_USAGE: exit 2)', async () => {
    const error = await usageError(keysFromOf({ keysFrom: 'objects' }));
    expect(error.code).toBe('KR_USAGE');
    expect(error.message).toBe('--keys-from "objects" must be file or kubernetes');
  });

  it("kubernetes: keyroll's namespace from the flag, else the service account's file, and the kubeconfig's cluster", async () => {
    await useKubeconfig(KUBECONFIG);
    const namespaceFile = join(temp.path(), 'namespace');
    await writeFile(namespaceFile, 'keyroll-system\n');
    const fromFile = await keysFromOf({ keysFrom: 'kubernetes' }, { namespaceFile });
    expect(fromFile?.namespace).toBe('keyroll-system');
    expect(fromFile?.kubeConfig.getCurrentCluster()?.server).toBe('https://127.0.0.1:6443');
    const fromFlag = await keysFromOf(
      { keysFrom: 'kubernetes', keyrollNamespace: 'platform' },
      { namespaceFile },
    );
    expect(fromFlag?.namespace).toBe('platform');
    // An empty flag (POD_NAMESPACE set but empty) falls back to the file.
    expect(
      (await keysFromOf({ keysFrom: 'kubernetes', keyrollNamespace: '' }, { namespaceFile }))?.namespace,
    ).toBe('keyroll-system');
  });

  it("kubernetes without keyroll's namespace, or without a client configuration, is a usage error", async () => {
    await useKubeconfig(KUBECONFIG);
    const noNamespace = await usageError(
      keysFromOf({ keysFrom: 'kubernetes' }, { namespaceFile: join(temp.path(), 'absent') }),
    );
    expect(noNamespace.message).toContain('--keyroll-namespace or env POD_NAMESPACE');
    // A kubeconfig that does not parse (a missing one would give client-node's default localhost cluster).
    await useKubeconfig('clusters: [unclosed\n');
    const noClient = await usageError(keysFromOf({ keysFrom: 'kubernetes', keyrollNamespace: 'keyroll' }));
    expect(noClient.message).toMatch(/^--keys-from kubernetes: /);
  });
});

describe('the --keys-from flags of daemon and status', () => {
  it('are one set: the same options, defaults from KEYROLL_KEYS_FROM and POD_NAMESPACE', () => {
    const program = new Command();
    registerDaemonCommand(program);
    registerStatusCommand(program);
    const flagsOf = (name: string) =>
      program.commands
        .find((command) => command.name() === name)
        ?.options.filter((option) => ['--keys-from', '--keyroll-namespace'].includes(option.long ?? ''))
        .map((option) => [option.flags, option.description]);
    expect(flagsOf('status')).toEqual(flagsOf('daemon'));
    expect(flagsOf('status')).toHaveLength(2);

    const command = addKeysFromOptions(new Command('x'), {
      KEYROLL_KEYS_FROM: 'kubernetes',
      POD_NAMESPACE: 'keyroll',
    });
    command.parse([], { from: 'user' });
    expect(command.opts()).toEqual({ keysFrom: 'kubernetes', keyrollNamespace: 'keyroll' });
    const defaults = addKeysFromOptions(new Command('y'), {});
    defaults.parse([], { from: 'user' });
    expect(defaults.opts()).toEqual({ keysFrom: 'file' });
  });

  it('keyroll status --keys-from with an unknown source, or without a namespace, exits 2 naming the flag', async () => {
    const bogus = await spawnCli(['status', '--keys-from', 'objects', '-o', 'json'], temp.path()).result;
    expect([bogus.code, bogus.stderr]).toEqual([
      2,
      'keyroll: --keys-from "objects" must be file or kubernetes\n',
    ]);
    const noNamespace = await spawnCli(['status', '--keys-from', 'kubernetes', '-o', 'json'], temp.path(), {
      env: { POD_NAMESPACE: undefined },
    }).result;
    expect(noNamespace.code).toBe(2);
    expect(noNamespace.stderr).toContain('--keyroll-namespace or env POD_NAMESPACE');
    expect(noNamespace.stdout).toBe('');
  });
});
