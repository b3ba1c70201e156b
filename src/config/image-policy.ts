import { compileImageGlobs } from './globs.ts';

/**
 * LILYPAD_ALLOWED_IMAGES: comma-separated globs; blanks between commas are ignored. A comma inside
 * `{...}` belongs to the pattern (`{python,node}:*` is one pattern, not two).
 */
function parseImagePatterns(patterns: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  for (const ch of patterns) {
    if (ch === '{') depth++;
    if (ch === '}' && depth > 0) depth--;
    if (ch === ',' && depth === 0) {
      out.push(current);
      current = '';
    } else current += ch;
  }
  out.push(current);
  return out.map((p) => p.trim()).filter(Boolean);
}

/**
 * Whether a repository may run its jobs in `image`. The administrator's default image is always
 * allowed; with no patterns it is the only one. Otherwise the name, exactly as the repository wrote
 * it, must match one of the patterns (see compileImageGlobs: `lilypad-sandbox:*` is every tag of that
 * image, `registry.example/sandboxes/**` everything under that path, `**` every image).
 */
export function imageAllowed(image: string, defaultImage: string, patterns: string): boolean {
  if (image === defaultImage) return true;
  const list = parseImagePatterns(patterns);
  if (list.length === 0) return false;
  return compileImageGlobs(list).firstMatches([image])[0] !== -1;
}
