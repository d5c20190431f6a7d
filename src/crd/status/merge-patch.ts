// The JSON merge patch (RFC 7386) that turns one JSON value into another, smallest first: only
// the fields that differ; a field to remove is null; an array or a scalar that differs is sent
// whole (a merge patch cannot edit an array in place). Empty when the two are equal, which is how
// the status writer knows there is nothing to write.

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Deep equality of two JSON values; key order does not matter. */
export function jsonEqual(a: Json | undefined, b: Json | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b))
    return a.length === b.length && a.every((item, index) => jsonEqual(item, b[index]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return (
      keys.length === Object.keys(b).length && keys.every((key) => key in b && jsonEqual(a[key], b[key]))
    );
  }
  return false;
}

/**
 * The merge patch from `from` to `to` for two objects: `{}` when they are equal. A key of `from`
 * missing in `to` becomes null (removed).
 */
export function mergePatch(
  from: { [key: string]: Json } | undefined,
  to: { [key: string]: Json },
): { [key: string]: Json } {
  const patch: { [key: string]: Json } = {};
  const before = from ?? {};
  for (const [key, value] of Object.entries(to)) {
    const old = before[key];
    if (isObject(old) && isObject(value)) {
      const inner = mergePatch(old, value);
      if (Object.keys(inner).length > 0) patch[key] = inner;
    } else if (!jsonEqual(old, value)) patch[key] = value;
  }
  for (const key of Object.keys(before)) if (!(key in to)) patch[key] = null;
  return patch;
}
