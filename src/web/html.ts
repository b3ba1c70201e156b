/** Small helpers for server-rendered pages: escaping, the page frame, numbers and times. */

import { escapeHtml } from '../shared/escape-html.ts';

/** Shared with the registration pages in github/, which sit below web/. */
export const esc = escapeHtml;

export interface PageFrame {
  title: string;
  /** Signed-in user and the session's CSRF token (for the sign-out form). */
  user?: { login: string; csrf: string } | undefined;
  /** Extra stylesheets and scripts (same-origin paths). */
  styles?: string[];
  scripts?: string[];
}

export function page(frame: PageFrame, body: string): string {
  const styles = ['/assets/run-pages.css', ...(frame.styles ?? [])].map((s) => `<link rel="stylesheet" href="${esc(s)}">`).join('');
  const scripts = (frame.scripts ?? []).map((s) => `<script src="${esc(s)}" defer></script>`).join('');
  const user = frame.user
    ? `<form class="signout" method="post" action="/auth/logout"><span>@${esc(frame.user.login)}</span><input type="hidden" name="csrf" value="${esc(frame.user.csrf)}"><button type="submit">Sign out</button></form>`
    : '';
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(frame.title)}</title>${styles}${scripts}</head><body><header class="top"><a class="brand" href="/runs">Lilypad runs</a>${user}</header><main>${body}</main></body></html>`;
}

export function formatMs(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s % 60)} s`;
  return `${Math.floor(m / 60)} h ${m % 60} min`;
}

export function formatCount(n: number): string {
  return n.toLocaleString('en-US');
}

export function formatTime(iso: string): string {
  return iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC');
}
