// The emulator's state accessors tests rely on (src/emulator/state.ts).
import { describe, expect, it } from 'vitest';
import { EmulatorUnknownEntityError } from '../../src/emulator/errors.ts';
import { parseEmulatorSeed, type EmulatorSeed } from '../../src/emulator/seed.ts';
import { EmulatorState } from '../../src/emulator/state.ts';

const MINIMAL: EmulatorSeed = {
  organizations: [{ id: 'org_a', slug: 'a', name: 'A', plan: 'starter' }],
  apiKeys: [{ id: 'key_a', name: 'a', organizationId: 'org_a' }],
};

describe('emulator state', () => {
  it('mints random secrets in the kmk_live_ format at every start', () => {
    const a = new EmulatorState(parseEmulatorSeed(MINIMAL, 'a'));
    const b = new EmulatorState(parseEmulatorSeed(MINIMAL, 'b'));
    expect(a.currentSecret('key_a')).toMatch(/^kmk_live_[A-Za-z0-9_-]{40}$/);
    expect(a.currentSecret('key_a')).not.toBe(b.currentSecret('key_a'));
  });

  it('seeded keys carry their plan rate; an explicit rate wins', () => {
    const state = new EmulatorState(
      parseEmulatorSeed(
        {
          ...MINIMAL,
          apiKeys: [
            ...(MINIMAL.apiKeys ?? []),
            { id: 'key_old', name: 'old', organizationId: 'org_a', rateLimitPerMinute: 10 },
          ],
        },
        's',
      ),
    );
    expect(state.apiKey('key_a').rateLimitPerMinute).toBe(600);
    expect(state.apiKey('key_old').rateLimitPerMinute).toBe(10);
  });

  it('revokeKey kills the current secret without rolling; a later roll brings a live one', () => {
    const state = new EmulatorState(parseEmulatorSeed(MINIMAL, 's'));
    const secret = state.currentSecret('key_a');
    state.revokeKey('key_a');
    expect(state.isLiveSecret('key_a', secret)).toBe(false);
    expect(state.keyForSecret(secret)).toBeUndefined();
    expect(state.rollCount('key_a')).toBe(0);
    const fresh = state.rollKey('key_a');
    expect(state.isLiveSecret('key_a', fresh)).toBe(true);
    expect(state.mintedSecrets()).toEqual([secret, fresh]);
    expect(state.totalRolls()).toBe(1);
  });

  it('addApiKey returns a working secret for the new key', () => {
    const state = new EmulatorState(parseEmulatorSeed(MINIMAL, 's'));
    const added = state.addApiKey({ name: 'extra', organizationId: 'org_a' });
    expect(state.keyForSecret(added.secret)?.id).toBe(added.id);
    expect(state.isLiveSecret('key_a', added.secret)).toBe(false);
  });

  it('asking about an unknown key is a typed error, not a silent zero', () => {
    const state = new EmulatorState(parseEmulatorSeed(MINIMAL, 's'));
    expect(() => state.rollCount('key_nope')).toThrow(EmulatorUnknownEntityError);
    expect(() => {
      state.setPlan('org_nope', 'pro');
    }).toThrow(EmulatorUnknownEntityError);
  });
});
