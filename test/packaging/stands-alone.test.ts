// A clone of the repository is all a person gets: no file may point at notes outside it, and every
// link between the repository's Markdown pages must lead to a file (and a heading) that exists.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { headingAnchor } from '../../scripts/error-codes-page.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));
const tracked = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\0')
  .filter((path) => path !== '' && existsSync(join(root, path)));
const markdown = tracked.filter((path) => path.endsWith('.md'));

function anchorsOf(path: string): Set<string> {
  const seen = new Map<string, number>();
  const anchors = new Set<string>();
  const text = readFileSync(join(root, path), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
  for (const match of text.matchAll(/^#{1,6} +(.+?) *#*$/gm)) {
    const base = headingAnchor(match[1] ?? '');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    anchors.add(count === 0 ? base : `${base}-${count}`);
  }
  return anchors;
}

describe('the repository stands alone', () => {
  it('no tracked file refers to the notes outside the repository', () => {
    // Spelt in pieces, so that a grep of the repository for them finds nothing, this file included.
    const outside = [['..', 'shared', ''].join('/'), ['', 'work', 'shared'].join('/')];
    const hits = tracked
      .filter((path) => !path.endsWith('package-lock.json'))
      .filter((path) => {
        const text = readFileSync(join(root, path), 'utf8');
        return outside.some((needle) => text.includes(needle));
      });
    expect(hits).toEqual([]);
  });

  it('every relative link in a Markdown page leads to a file of the repository, and an anchor to a heading of it', () => {
    expect(markdown).toEqual(expect.arrayContaining(['README.md', 'docs/design.md', 'docs/api.md']));
    const broken: string[] = [];
    for (const page of markdown) {
      const text = readFileSync(join(root, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
      for (const match of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        const link = match[1] ?? '';
        if (/^[a-z]+:/i.test(link)) continue;
        const [target = '', anchor] = link.split('#');
        const file = target === '' ? page : relative(root, join(root, dirname(page), target));
        if (!existsSync(join(root, file))) {
          broken.push(`${page}: ${link} (no such file)`);
        } else if (anchor !== undefined && file.endsWith('.md') && !anchorsOf(file).has(anchor)) {
          broken.push(`${page}: ${link} (no such heading)`);
        }
      }
    }
    expect(broken).toEqual([]);
  });
});
