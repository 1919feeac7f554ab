// The status page at "/": one HTML page, one script, one stylesheet, all embedded in the package as strings
// (assets.ts) so they are found from the sources, from dist/ and from a single-file bundle alike, with no build
// step for the user and nothing from a CDN. The page reads GET /overview (and /routes?lpm= for its lookup box).
import { HttpError, type Reply, type StatusServer } from '../http.ts';

/**
 * The page builds its DOM with textContent only; the policy makes that a rule the browser enforces too: no inline
 * script or style, nothing from another origin, no framing.
 */
export const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const TYPES: Record<string, string> = { html: 'text/html', js: 'text/javascript', css: 'text/css' };

/** The page's files by path. */
export async function uiReply(path: string): Promise<Reply> {
  // Loaded on first visit only: a daemon nobody looks at does not hold the page in memory.
  const { INDEX_HTML, APP_JS, STYLE_CSS } = await import('./assets.ts');
  const files: Record<string, [string, string]> = {
    '/': [INDEX_HTML, 'html'],
    '/ui/app.js': [APP_JS, 'js'],
    '/ui/style.css': [STYLE_CSS, 'css'],
  };
  const f = files[path];
  if (!f) throw new HttpError(404, `no such endpoint: ${path} (the status page is at /)`);
  return {
    body: f[0],
    contentType: TYPES[f[1]],
    headers: { 'content-security-policy': CONTENT_SECURITY_POLICY, 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' },
  };
}

/** Serve the page at "/" and its script and stylesheet under /ui/. */
export function addStatusPage(server: StatusServer): void {
  server.route('/', (url) => uiReply(url.pathname));
  server.route('/ui/', (url) => uiReply(url.pathname));
}
