// The secrets the sanitizer knows, held as digests only (invariant 3; issue 12).
//
// No plaintext is kept: a heap dump, an inspector session or a core file shows nothing a reader
// could use directly. For each spelling of a secret (secret-forms.ts) the registry keeps
//   - its length and a keyed digest of it (SHA-256 of a key drawn at start followed by the form,
//     128 bits kept): a window of text of that length is the secret when its digest is in the set;
//   - a 32-bit polynomial hash of its first 8 characters (random odd base), the "tag": text is
//     scanned with the same hash rolled over every 8-character window, so only windows whose tag
//     is known are digested (a line with no secret costs one multiply-add per character);
//   - a keyed digest of those 8 characters and the classes of characters the form uses, so a
//     text that ends with a cut-off secret (a truncated body, a capped read) can be blanked from
//     the secret's start to the end.
// What a dump reveals: a 32-bit hash and a digest of the first 8 characters (for a secret with a
// vendor prefix, those are public anyway), the lengths and character classes, and digests that
// can only be attacked by guessing whole values. Values under 8 characters are kept as a digest
// of the value alone and blanked only after a credential marker (sanitize.ts).
//
// Lifetimes (issue 12): an entry is held by any of
//   - a pin: long-lived credentials (the trigger key, bearer tokens, Vault and OAuth tokens)
//     are pinned for their lifetime, forever when it is unknown; never evicted;
//   - a secret scope (`withSecretScope`): a value first seen inside a rotation is held until the
//     rotation ends, then dropped, so a rolled secret does not outlive its rotation here;
//   - the loose set: values seen outside any scope, bounded to MAX_LOOSE, oldest evicted first.
// A pin that runs out turns into a loose hold (a dead credential may still be blanked a while).
import { AsyncLocalStorage } from 'node:async_hooks';
import { alphabetOf, keyedDigest, PREFIX_LENGTH, prefixTag } from './secret-digest.ts';
import { formsOf, MIN_FORM_LENGTH } from './secret-forms.ts';

// Far more than are alive in one process at once: a rotation holds its own secrets in its scope.
const MAX_LOOSE = 4096;

interface FormRecord {
  tag: number;
  length: number;
  digest: string;
  prefixDigest: string;
  /** `${length}:${alphabet}`: what a cut-off copy of the form may look like. */
  shape: string;
}

interface Entry {
  forms: FormRecord[];
  /** Digest of a value under PREFIX_LENGTH characters. */
  short: string | undefined;
  /** 0: not pinned; Infinity: pinned for good; else pinned until this epoch ms. */
  pinnedUntil: number;
  /** Open secret scopes holding it. */
  scopes: number;
  loose: boolean;
}

/** Entries by the keyed digest of the value. */
const entries = new Map<string, Entry>();
/** Loose entries, oldest first. */
const looseOrder = new Set<string>();
/** Entries pinned for a finite lifetime. */
const expiringPins = new Set<string>();
let nextPinExpiry = Number.POSITIVE_INFINITY;
/** tag → form length → form digest → how many entries have that form. */
const formIndex = new Map<number, Map<number, Map<string, number>>>();
/** tag → digest of the first PREFIX_LENGTH characters → shape → count. */
const prefixIndex = new Map<number, Map<string, Map<string, number>>>();
/** Digests of short values → count. */
const shortIndex = new Map<string, number>();
const counts = { long: 0, short: 0 };

function adjust<K>(map: Map<K, number>, key: K, delta: number): void {
  const count = (map.get(key) ?? 0) + delta;
  if (count > 0) map.set(key, count);
  else map.delete(key);
}

function inner<K, V>(map: Map<K, V>, key: K, create: () => V): V {
  let value = map.get(key);
  if (value === undefined) {
    value = create();
    map.set(key, value);
  }
  return value;
}

function indexForm(form: FormRecord, delta: 1 | -1): void {
  const byLength = inner(formIndex, form.tag, () => new Map<number, Map<string, number>>());
  const digests = inner(byLength, form.length, () => new Map<string, number>());
  adjust(digests, form.digest, delta);
  if (digests.size === 0) byLength.delete(form.length);
  if (byLength.size === 0) formIndex.delete(form.tag);
  const byPrefix = inner(prefixIndex, form.tag, () => new Map<string, Map<string, number>>());
  const shapes = inner(byPrefix, form.prefixDigest, () => new Map<string, number>());
  adjust(shapes, form.shape, delta);
  if (shapes.size === 0) byPrefix.delete(form.prefixDigest);
  if (byPrefix.size === 0) prefixIndex.delete(form.tag);
}

function describeForm(form: string): FormRecord {
  return {
    tag: prefixTag(form, 0),
    length: form.length,
    digest: keyedDigest(form),
    prefixDigest: keyedDigest(form.slice(0, PREFIX_LENGTH)),
    shape: `${String(form.length)}:${alphabetOf(form)}`,
  };
}

function createEntry(value: string): Entry {
  const isShort = value.length < MIN_FORM_LENGTH;
  const entry: Entry = {
    forms: isShort ? [] : formsOf(value).map(describeForm),
    short: isShort ? keyedDigest(value) : undefined,
    pinnedUntil: 0,
    scopes: 0,
    loose: false,
  };
  for (const form of entry.forms) indexForm(form, 1);
  if (entry.short !== undefined) adjust(shortIndex, entry.short, 1);
  if (isShort) counts.short++;
  else counts.long++;
  return entry;
}

function dropIfUnheld(id: string): void {
  const entry = entries.get(id);
  if (entry === undefined || entry.loose || entry.scopes > 0 || entry.pinnedUntil > 0) return;
  for (const form of entry.forms) indexForm(form, -1);
  if (entry.short !== undefined) {
    adjust(shortIndex, entry.short, -1);
    counts.short--;
  } else {
    counts.long--;
  }
  entries.delete(id);
}

function holdLoose(id: string, entry: Entry): void {
  entry.loose = true;
  looseOrder.delete(id);
  looseOrder.add(id);
  while (looseOrder.size > MAX_LOOSE) {
    const oldest = looseOrder.values().next();
    if (oldest.done === true) break;
    looseOrder.delete(oldest.value);
    const evicted = entries.get(oldest.value);
    if (evicted) evicted.loose = false;
    dropIfUnheld(oldest.value);
  }
}

function sweepExpiredPins(now: number): void {
  if (now < nextPinExpiry) return;
  nextPinExpiry = Number.POSITIVE_INFINITY;
  for (const id of expiringPins) {
    const entry = entries.get(id);
    if (entry === undefined) {
      expiringPins.delete(id);
    } else if (entry.pinnedUntil <= now) {
      expiringPins.delete(id);
      entry.pinnedUntil = 0;
      holdLoose(id, entry);
    } else {
      nextPinExpiry = Math.min(nextPinExpiry, entry.pinnedUntil);
    }
  }
}

interface Scope {
  readonly held: Set<string>;
  open: boolean;
}

const scopes = new AsyncLocalStorage<Scope>();

function entryFor(value: string): { id: string; entry: Entry } {
  sweepExpiredPins(Date.now());
  const id = keyedDigest(value);
  let entry = entries.get(id);
  if (entry === undefined) {
    entry = createEntry(value);
    entries.set(id, entry);
  }
  return { id, entry };
}

/**
 * Makes `value` known: held by the secret scope this call runs in (until the scope ends), or
 * else by the bounded loose set. Empty values are ignored.
 */
export function registerValue(value: string): void {
  if (value === '') return;
  const { id, entry } = entryFor(value);
  const scope = scopes.getStore();
  if (scope?.open === true) {
    if (!scope.held.has(id)) {
      scope.held.add(id);
      entry.scopes++;
    }
    if (entry.loose) holdLoose(id, entry);
  } else {
    holdLoose(id, entry);
  }
}

/** Pins `value` for `lifetimeMs` from now, or for good when no lifetime is given. */
export function pinValue(value: string, lifetimeMs?: number): void {
  if (value === '') return;
  const { id, entry } = entryFor(value);
  const until =
    lifetimeMs === undefined || !Number.isFinite(lifetimeMs)
      ? Number.POSITIVE_INFINITY
      : Date.now() + Math.max(0, lifetimeMs);
  if (until <= entry.pinnedUntil) return;
  entry.pinnedUntil = until;
  if (until === Number.POSITIVE_INFINITY) {
    expiringPins.delete(id);
  } else {
    expiringPins.add(id);
    nextPinExpiry = Math.min(nextPinExpiry, until);
  }
}

/**
 * Runs `work` in a secret scope: every value registered inside it (a rolled secret, a read-back)
 * is dropped when `work` settles, unless something else holds it too (a pin, another scope, a
 * registration outside any scope). A registration made after the scope ended, by a timer it
 * started, is an ordinary loose one.
 */
export async function withSecretScope<T>(work: () => Promise<T>): Promise<T> {
  const scope: Scope = { held: new Set(), open: true };
  try {
    return await scopes.run(scope, work);
  } finally {
    scope.open = false;
    for (const id of scope.held) {
      const entry = entries.get(id);
      if (entry === undefined) continue;
      entry.scopes = Math.max(0, entry.scopes - 1);
      dropIfUnheld(id);
    }
    scope.held.clear();
  }
}

/** How many long (>= PREFIX_LENGTH characters) and short values are known. */
export function knownCounts(): Readonly<{ long: number; short: number }> {
  return counts;
}

/** The form lengths and digests whose first window has `tag`. */
export function formsTagged(tag: number): ReadonlyMap<number, ReadonlyMap<string, number>> | undefined {
  return formIndex.get(tag);
}

/** The shapes (`length:alphabet`) of forms that start with the window of this tag and digest. */
export function shapesStartingWith(
  tag: number,
  prefixDigest: string,
): ReadonlyMap<string, number> | undefined {
  return prefixIndex.get(tag)?.get(prefixDigest);
}

export function isShortSecret(digest: string): boolean {
  return shortIndex.has(digest);
}

/** For tests: every structure the registry keeps (to show that none holds plaintext). */
export function registryStateForTests(): Record<string, unknown> {
  return { entries, looseOrder, expiringPins, formIndex, prefixIndex, shortIndex, counts };
}

/** For tests: forget every registered value. */
export function resetRegistryForTests(): void {
  entries.clear();
  looseOrder.clear();
  expiringPins.clear();
  nextPinExpiry = Number.POSITIVE_INFINITY;
  formIndex.clear();
  prefixIndex.clear();
  shortIndex.clear();
  counts.long = 0;
  counts.short = 0;
}
