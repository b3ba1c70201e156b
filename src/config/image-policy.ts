import { compileImageGlobs } from './globs.ts';

/** LILYPAD_ALLOWED_IMAGES: comma-separated globs; blanks between commas are ignored. */
export function parseImagePatterns(patterns: string): string[] {
  return patterns
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
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
