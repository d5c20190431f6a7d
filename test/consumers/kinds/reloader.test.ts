// Which workloads Stakater Reloader restarts for a Secret, as its ShouldReload and
// getContainerUsingResource decide (v1.4.19), and the mark its restart leaves.
import { describe, expect, it } from 'vitest';
import type { KubeObject } from '../../../src/consumers/kubernetes/client.ts';
import {
  reloaderEnvName,
  reloaderMark,
  reloaderRestarted,
  reloaderWatch,
  reloaderWatches,
  targetSecretOf,
} from '../../../src/consumers/kinds/reloader.ts';

function deployment(options: {
  annotations?: Record<string, string>;
  templateAnnotations?: Record<string, string>;
  env?: { name: string; value?: string; valueFrom?: unknown }[];
  envFrom?: unknown[];
  volumes?: unknown[];
  mounts?: unknown[];
}): KubeObject {
  return {
    metadata: { name: 'billing', ...(options.annotations ? { annotations: options.annotations } : {}) },
    spec: {
      template: {
        metadata: { ...(options.templateAnnotations ? { annotations: options.templateAnnotations } : {}) },
        spec: {
          containers: [
            {
              name: 'app',
              env: options.env ?? [],
              envFrom: options.envFrom ?? [],
              volumeMounts: options.mounts ?? [],
            },
          ],
          volumes: options.volumes ?? [],
        },
      },
    },
  };
}

const secret = { name: 'billing-api-key', annotations: {} };
const usesIt = {
  env: [{ name: 'API_KEY', valueFrom: { secretKeyRef: { name: 'billing-api-key', key: 'apiKey' } } }],
};

describe('reloaderWatches', () => {
  it('auto on the workload, with a container referencing the Secret', () => {
    expect(
      reloaderWatches(
        deployment({ annotations: { 'reloader.stakater.com/auto': 'true' }, ...usesIt }),
        secret,
      ),
    ).toBe(true);
  });
  it('auto without a reference: Reloader finds no container and restarts nothing', () => {
    expect(
      reloaderWatches(deployment({ annotations: { 'reloader.stakater.com/auto': 'true' } }), secret),
    ).toBe(false);
  });
  it('auto on the pod template when the workload has none of the triggers', () => {
    expect(
      reloaderWatches(
        deployment({
          templateAnnotations: { 'secret.reloader.stakater.com/auto': 'true' },
          envFrom: [{ secretRef: { name: 'billing-api-key' } }],
        }),
        secret,
      ),
    ).toBe(true);
  });
  it('the pod template is not read when the workload carries a trigger', () => {
    expect(
      reloaderWatches(
        deployment({
          annotations: { 'secret.reloader.stakater.com/reload': 'other' },
          templateAnnotations: { 'reloader.stakater.com/auto': 'true' },
          ...usesIt,
        }),
        secret,
      ),
    ).toBe(false);
  });
  it('reload by name, each an anchored regular expression, without a reference', () => {
    expect(
      reloaderWatches(
        deployment({ annotations: { 'secret.reloader.stakater.com/reload': 'other, billing-.*' } }),
        secret,
      ),
    ).toBe(true);
    expect(
      reloaderWatches(
        deployment({ annotations: { 'secret.reloader.stakater.com/reload': 'billing' } }),
        secret,
      ),
    ).toBe(false);
  });
  it('search needs the match annotation on the Secret and a reference (a mounted volume)', () => {
    const workload = deployment({
      annotations: { 'reloader.stakater.com/search': 'true' },
      volumes: [{ name: 'key', secret: { secretName: 'billing-api-key' } }],
      mounts: [{ name: 'key', mountPath: '/key' }],
    });
    expect(reloaderWatches(workload, secret)).toBe(false);
    expect(
      reloaderWatches(workload, { ...secret, annotations: { 'reloader.stakater.com/match': 'true' } }),
    ).toBe(true);
  });
  it('excluded by the workload, or ignored by the Secret', () => {
    expect(
      reloaderWatches(
        deployment({
          annotations: {
            'reloader.stakater.com/auto': 'true',
            'secrets.exclude.reloader.stakater.com/reload': 'x, billing-api-key',
          },
          ...usesIt,
        }),
        secret,
      ),
    ).toBe(false);
    expect(
      reloaderWatches(deployment({ annotations: { 'reloader.stakater.com/auto': 'true' }, ...usesIt }), {
        ...secret,
        annotations: { 'reloader.stakater.com/ignore': 'true' },
      }),
    ).toBe(false);
  });
  it('no annotation: not watched', () => {
    expect(reloaderWatches(deployment(usesIt), secret)).toBe(false);
  });
});

describe('the Secret an ExternalSecret writes', () => {
  it('spec.target.name, else its own name, with the target template annotations', () => {
    expect(
      targetSecretOf({
        metadata: { name: 'es' },
        spec: {
          target: {
            name: 'out',
            template: { metadata: { annotations: { 'reloader.stakater.com/match': 'true' } } },
          },
        },
      }),
    ).toEqual({ name: 'out', annotations: { 'reloader.stakater.com/match': 'true' } });
    expect(targetSecretOf({ metadata: { name: 'es' }, spec: {} })).toEqual({ name: 'es', annotations: {} });
  });
});

describe("Reloader's mark", () => {
  it('its variable name (ConvertToEnvVarName)', () => {
    expect(reloaderEnvName('billing-api-key')).toBe('STAKATER_BILLING_API_KEY_SECRET');
    expect(reloaderEnvName('a..b')).toBe('STAKATER_A_B_SECRET');
  });
  it('a change of the variable or of last-reloaded-from for the Secret is a restart; another Secret is not', () => {
    const before = deployment({ annotations: { 'reloader.stakater.com/auto': 'true' }, ...usesIt });
    const watch = reloaderWatch(before, [secret]);
    expect(watch?.secrets).toEqual(['billing-api-key']);
    if (watch === undefined) return;
    expect(reloaderRestarted(before, watch)).toBe(false);
    expect(
      reloaderRestarted(
        deployment({ env: [...usesIt.env, { name: 'STAKATER_BILLING_API_KEY_SECRET', value: 'abc' }] }),
        watch,
      ),
    ).toBe(true);
    expect(
      reloaderRestarted(
        deployment({
          ...usesIt,
          templateAnnotations: {
            'reloader.stakater.com/last-reloaded-from': JSON.stringify({
              type: 'SECRET',
              name: 'billing-api-key',
              hash: 'abc',
            }),
          },
        }),
        watch,
      ),
    ).toBe(true);
    expect(
      reloaderRestarted(
        deployment({
          ...usesIt,
          templateAnnotations: {
            'reloader.stakater.com/last-reloaded-from': JSON.stringify({
              type: 'SECRET',
              name: 'other',
              hash: 'abc',
            }),
          },
        }),
        watch,
      ),
    ).toBe(false);
    expect(reloaderMark(before, 'billing-api-key')).not.toContain('API_KEY');
  });
});
