// --replay-store: `file` keeps the records in --state-dir; `kubernetes:NAMESPACE/PREFIX` names the
// ConfigMaps every replica shares; anything else is a usage error (exit 2) before anything starts.
import { KubeConfig } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseReplayStore } from '../../src/daemon/replay-store.ts';
import { UsageError } from '../../src/errors.ts';

const config = new KubeConfig();
const load = (): KubeConfig => config;

describe('parseReplayStore', () => {
  it('is undefined for file (the state directory)', () => {
    expect(parseReplayStore('file', {}, load)).toBeUndefined();
  });

  it('names the namespace and the ConfigMaps prefix of a kubernetes store, with the loaded client configuration', () => {
    expect(parseReplayStore('kubernetes:keyroll/keyroll-replay', {}, load)).toEqual({
      kind: 'kubernetes',
      namespace: 'keyroll',
      prefix: 'keyroll-replay',
      kubeConfig: config,
    });
  });

  it.each([
    '',
    'kubernetes',
    'kubernetes:keyroll',
    'kubernetes:/prefix',
    'configmap:keyroll/replay',
    'kubernetes:Keyroll/replay',
    'kubernetes:keyroll/Replay_Records',
    'kubernetes:keyroll/a/b',
  ])('refuses %j as a usage error', (text) => {
    expect(() => parseReplayStore(text, {}, load)).toThrow(UsageError);
  });
});
