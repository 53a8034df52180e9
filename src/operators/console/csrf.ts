// CSRF protection for the console's changes: a double-submitted token, plus the browser's own origin signals.
//
// The page's forms carry a random token that is also in an HttpOnly, SameSite=Strict cookie. A POST is
// accepted only when both are present and equal, and when the browser's Origin and Sec-Fetch-Site
// headers, where it sends them, say the form came from this same origin. Another site can neither read
// the token (same-origin policy; the page cannot be framed) nor make the browser send the cookie with
// its own forms. Nothing is kept per session, so it works unchanged behind a load balancer.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

export const CSRF_COOKIE = 'rk_console_csrf';
export const CSRF_FIELD = 'csrf';
const TOKEN = /^[A-Za-z0-9_-]{43}$/;

function cookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** The page's token: the browser's cookie when it holds a well-formed one, else a new one set now. */
export function pageToken(req: IncomingMessage, res: ServerResponse, path: string): string {
  const current = cookie(req, CSRF_COOKIE);
  if (current !== undefined && TOKEN.test(current)) return current;
  const token = randomBytes(32).toString('base64url');
  const secure = (req.socket as { encrypted?: boolean }).encrypted === true ? '; Secure' : '';
  res.appendHeader(
    'Set-Cookie',
    `${CSRF_COOKIE}=${token}; Path=${cookiePath(path)}; HttpOnly; SameSite=Strict${secure}`,
  );
  return token;
}

/** The cookie is sent only to the console's own path. */
function cookiePath(path: string): string {
  const trimmed = path.replace(/\/+$/, '');
  return /^\/[\w\-./~%]*$/.test(trimmed) ? trimmed : '/';
}

/** Why a change request is refused, or undefined when it may proceed. */
export function refuseChange(req: IncomingMessage, submitted: string | undefined): string | undefined {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin') return `the form came from another site (${site})`;
  const origin = req.headers.origin;
  if (origin !== undefined && origin !== 'null') {
    let host: string;
    try {
      host = new URL(origin).host;
    } catch {
      return 'the Origin header is not a URL';
    }
    if (host !== req.headers.host) return `the form came from another origin (${origin})`;
  } else if (origin === 'null') {
    return 'the form came from an opaque origin';
  }
  const expected = cookie(req, CSRF_COOKIE);
  if (expected === undefined || !TOKEN.test(expected)) return 'no CSRF cookie: reload the console page';
  if (submitted === undefined || submitted === '') return 'the CSRF token is missing';
  const a = Buffer.from(expected);
  const b = Buffer.from(submitted);
  if (a.length !== b.length || !timingSafeEqual(a, b)) return 'the CSRF token does not match';
  return undefined;
}
