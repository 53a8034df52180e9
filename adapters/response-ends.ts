// When the app is done with a Node response, decided here for every Node framework: Express, Fastify and
// Nest (their handler ends the response), Koa and Hono on Node (the app ran and handed its response over).

/** A Node response as `responseEnded` needs it. */
export interface ResponseToEnd {
  end: (...args: never[]) => unknown;
  readonly writableEnded?: boolean;
  /** Its status line and headers are out: the handler has begun its answer. */
  readonly headersSent?: boolean;
  on(event: 'finish' | 'close', listener: () => void): unknown;
  once(event: 'pipe', listener: () => void): unknown;
  off(event: 'pipe', listener: () => void): unknown;
}

/** A Node response as `responseWritten` needs it. */
export interface ResponseToWrite {
  readonly destroyed?: boolean;
  once(event: 'finish' | 'close', listener: () => void): unknown;
}

/**
 * Express, Fastify, Nest: calls `done` once when the app is done with a Node response: Node has handed it
 * whole to the connection (`finish`), or the connection closed and the response can no longer end (see
 * `closedUnfinished`).
 *
 * `finish` comes later than `end()` for a response queued behind another on the connection (pipelining),
 * and for one larger than the connection's buffers while the client reads it.
 */
export function responseEnded(res: ResponseToEnd, done: () => void, lapse?: () => void): void {
  if (res.writableEnded === true) {
    done();
    return;
  }
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    done();
  };
  const piping = pipedInto(res);
  res.on('finish', once);
  res.on('close', () => {
    if (!called) closedUnfinished(res, once, piping.piped, lapse);
  });
}

/**
 * Koa, Hono on Node: calls `done` once a Node response the app has handed over (the rest of the app ran)
 * is all written (`finish`), or at once when its connection is closed, or when it closes mid-stream: no
 * more of it can be written then.
 */
export function responseWritten(res: ResponseToWrite, done: () => void): void {
  if (res.destroyed === true) {
    done();
    return;
  }
  let called = false;
  const once = () => {
    if (called) return;
    called = true;
    done();
  };
  res.once('close', once);
  res.once('finish', once);
}

/**
 * Whether a stream was piped into `res` (Node's `pipe`, as `pipeline` of a Node stream, `sendFile`,
 * Fastify's `send(stream)` and Nest's `StreamableFile` do): read `piped` when it matters.
 */
function pipedInto(res: ResponseToEnd): { piped: boolean } {
  const state = { piped: false };
  res.once('pipe', () => {
    state.piped = true;
  });
  return state;
}

/**
 * Calls `done` once the app is done with a Node response whose connection closed before Node finished it:
 * - at once when it was ended (queued, or closed while it was written), or when a stream was piped into it:
 *   the pipe stops when the response closes, and nothing will end it (a download torn down mid-way);
 * - else the handler still works, and keeps its slot until it ends the response, or pipes a stream into
 *   it (its last step), whatever Node makes of it then. A response it had begun by hand (headers out)
 *   can no longer reach its client: `lapse` stops renewing the slot, which lapses a lease later unless
 *   the handler ends the response first (an SSE handler that stops writing when its client goes, and
 *   never calls `end()`, holds it that long, not for good).
 * `end()` is replaced only on a response that closed unanswered: replacing it on every response would
 * cost each request more than a listener.
 */
function closedUnfinished(res: ResponseToEnd, done: () => void, piped: boolean, lapse?: () => void): void {
  if (res.writableEnded === true || piped) {
    done();
    return;
  }
  if (res.headersSent === true) lapse?.();
  const end = res.end;
  const answered = () => {
    res.end = end;
    res.off('pipe', answered);
    done();
  };
  res.end = function (this: unknown, ...args: never[]) {
    answered();
    return end.apply(this, args);
  };
  res.once('pipe', answered);
}
