import { describe, expect, it } from 'vitest';
import { slugify } from '../../src/emulator/slug.ts';

describe('slugify (project slug regeneration rules)', () => {
  const cases: [string, string][] = [
    ['Storefront', 'storefront'],
    ['Mobile Apps (iOS & Android)', 'mobile-apps-ios-android'],
    ['  Crème Brûlée  ', 'creme-brulee'],
    ['a--b__c', 'a-b-c'],
    ['日本語', ''],
    ['!!!', ''],
    ['x'.repeat(60), 'x'.repeat(48)],
    [`${'a'.repeat(47)} tail`, 'a'.repeat(47)],
  ];
  for (const [name, slug] of cases) {
    it(`${JSON.stringify(name.slice(0, 20))} → ${JSON.stringify(slug.slice(0, 20))}`, () => {
      expect(slugify(name)).toBe(slug);
    });
  }
});
