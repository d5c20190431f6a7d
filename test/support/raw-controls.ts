// What a terminal would act on rather than print, as found in a text (issue 27, finding 4): C0
// controls but the line feed, DEL, C1 controls and the bidirectional controls, each as `U+XXXX`,
// so an assertion `toEqual([])` names what got through.
export function rawControls(text: string): string[] {
  const found: string[] = [];
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    const control =
      (code < 0x20 && code !== 0x0a) ||
      (code >= 0x7f && code <= 0x9f) ||
      (code >= 0x202a && code <= 0x202e) ||
      (code >= 0x2066 && code <= 0x2069) ||
      code === 0x200e ||
      code === 0x200f ||
      code === 0x061c;
    if (control) found.push(`U+${code.toString(16).toUpperCase().padStart(4, '0')}`);
  }
  return found;
}
