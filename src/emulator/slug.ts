// Slugs for projects and consent instances. The spec says only that updating projectName
// regenerates the project slug; the rules below are the emulator's (docs/emulator.md).

const MAX_SLUG_LENGTH = 48;

/**
 * Lowercase ASCII letters and digits joined by single hyphens, at most 48 chars, derived from
 * the name: accents are stripped, every other run of characters becomes one hyphen.
 * Returns '' when the name has no letter or digit (the caller refuses such a name).
 */
export function slugify(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, MAX_SLUG_LENGTH)
    .replace(/-+$/, '');
}
