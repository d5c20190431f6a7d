import { describe, expect, it } from 'vitest';
import { jsonEqual, mergePatch } from '../../../src/crd/status/merge-patch.ts';

describe('mergePatch', () => {
  it('is empty for equal objects, whatever the key order', () => {
    expect(mergePatch({ a: 1, b: { c: [1, { d: 2 }] } }, { b: { c: [1, { d: 2 }] }, a: 1 })).toEqual({});
  });

  it('sends only what differs, nested objects by field, arrays whole', () => {
    expect(
      mergePatch({ a: 1, b: { c: 1, d: 2 }, list: [1, 2] }, { a: 1, b: { c: 1, d: 3 }, list: [1, 2, 3] }),
    ).toEqual({ b: { d: 3 }, list: [1, 2, 3] });
  });

  it('removes a field the new value lacks (null), and adds a new one', () => {
    expect(mergePatch({ a: 1, gone: { x: 1 } }, { a: 1, added: 'y' })).toEqual({ added: 'y', gone: null });
  });

  it('from nothing: the whole value', () => {
    expect(mergePatch(undefined, { a: { b: 1 } })).toEqual({ a: { b: 1 } });
  });
});

describe('jsonEqual', () => {
  it('tells arrays of different length, objects of different keys, and types apart', () => {
    expect(jsonEqual([1], [1, 2])).toBe(false);
    expect(jsonEqual({ a: 1 }, { b: 1 })).toBe(false);
    expect(jsonEqual({ a: 1 }, { a: 1, b: 2 })).toBe(false);
    expect(jsonEqual('1', 1)).toBe(false);
    expect(jsonEqual(null, {})).toBe(false);
  });
});
