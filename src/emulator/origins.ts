// The trusted-origin rules of the consent update: an exact origin, the single wildcard `*`, or
// `*.` followed by a domain. Everything else is refused (INVALID_ORIGIN). Where the spec is
// silent (case, ports, IP hosts) the choices are in docs/emulator.md.

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

export type OriginVerdict = { ok: true } | { ok: false; reason: string };

export function checkTrustedOrigin(value: string): OriginVerdict {
  if (value === '*') return { ok: true };
  if (value.startsWith('*.')) {
    return isDomain(value.slice(2))
      ? { ok: true }
      : { ok: false, reason: 'a wildcard must be "*." followed by a domain of at least two labels' };
  }
  return checkExactOrigin(value);
}

/**
 * An exact origin in the canonical form browsers send in the Origin header:
 * `http(s)://host[:port]`, lowercase, no default port, no path, no trailing slash.
 */
function checkExactOrigin(value: string): OriginVerdict {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { ok: false, reason: 'not an origin, "*", or "*." followed by a domain' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    return { ok: false, reason: 'an origin must use http or https' };
  }
  if (url.hostname.includes('*'))
    return { ok: false, reason: 'a wildcard is only allowed as a leading "*."' };
  if (url.origin !== value) {
    return {
      ok: false,
      reason:
        'an origin is scheme://host[:port] in lowercase, without path, query, default port or trailing slash',
    };
  }
  return { ok: true };
}

/** Two or more DNS labels, the last one not all digits (so `*.10.0.0.1` is refused). */
function isDomain(text: string): boolean {
  if (text.length > 253) return false;
  const labels = text.split('.');
  if (labels.length < 2) return false;
  if (!labels.every((label) => LABEL.test(label))) return false;
  return !/^\d+$/.test(labels[labels.length - 1] ?? '');
}
