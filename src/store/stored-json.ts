import type { z } from 'zod';

/**
 * A JSON value Lilypad stored in Redis, read back through its schema. Redis is a boundary too (an
 * older version's records, a hand edit, a partial write): anything unreadable is null, never thrown.
 */
export function parseStored<T>(schema: z.ZodType<T>, raw: string | null | undefined): T | null {
  if (!raw) return null;
  try {
    const parsed = schema.safeParse(JSON.parse(raw));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** The readable entries of a stored list, in order. */
export function parseStoredList<T>(schema: z.ZodType<T>, lines: readonly string[]): T[] {
  return lines.flatMap((line) => {
    const value = parseStored(schema, line);
    return value === null ? [] : [value];
  });
}
