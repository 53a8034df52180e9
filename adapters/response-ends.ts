// When the app is done with a Node response, told by Node's HTTP server rather than by the response's own
// `finish` and `close`: the server announces each response it finishes on a diagnostics channel, and a
// connection's `close` covers the responses it never finished. Node only (the Express adapter).

import { subscribe } from 'node:diagnostics_channel';
import { Socket } from 'node:net';
import { pipedInto, type ResponseToEnd, responseClosedUnfinished, responseEnded } from './common.js';

/** What Node's HTTP server publishes as it finishes a response (`http.server.response.finish`). */
interface FinishMessage {
  readonly response: object;
  readonly socket: object;
}

/** A response waiting to end, and what to call then; the responses waiting on one connection are a list. */
interface Waiting {
  readonly res: ResponseToEnd;
  readonly done: () => void;
  /** Whether a stream was piped into the response. */
  readonly piping: { piped: boolean };
  next: Waiting | undefined;
}

/**
 * The responses waiting to end, by their connection: present (null when none waits) from the first
 * response waited for on a connection until it closes, so that its `close` is listened to once.
 */
const waiting = new Map<object, Waiting | null>();
/** Whether this module listens to the channel (from the first response waited for on). */
let subscribed = false;
/**
 * Whether the channel has carried a message in this process: Node's own server publishes there, other
 * runtimes' may not. Until it has, each response is listened to as well.
 */
let heard = false;

function onFinish(message: unknown): void {
  // Anything in the process may publish on the channel: only Node's messages are read.
  if (typeof message !== 'object' || message === null) return;
  const { response, socket } = message as FinishMessage;
  if (socket instanceof Socket) heard = true;
  const first = waiting.get(socket);
  if (first == null) return;
  // Most connections have one response at a time; a response limited twice (two limiters) waits twice.
  let kept: Waiting | undefined;
  let last: Waiting | undefined;
  let ended: Waiting | undefined;
  for (let w: Waiting | undefined = first; w !== undefined; ) {
    const next: Waiting | undefined = w.next;
    w.next = undefined;
    if (w.res === response) {
      w.next = ended;
      ended = w;
    } else {
      if (last === undefined) kept = w;
      else last.next = w;
      last = w;
    }
    w = next;
  }
  waiting.set(socket, kept ?? null);
  for (let w = ended; w !== undefined; w = w.next) w.done();
}

/**
 * The connection closed: each response still waiting on it is done at once when it was ended, else when
 * its handler ends it (a client that went does not free what its handler holds).
 */
function onClose(this: object): void {
  const first = waiting.get(this);
  waiting.delete(this);
  for (let w = first ?? undefined; w !== undefined; w = w.next)
    responseClosedUnfinished(w.res, w.done, w.piping.piped);
}

/**
 * Calls `done` once when the app is done with `res`, as `responseEnded` does, with one listener on the
 * response (a stream piped into it) instead of three where it can.
 *
 * `open`: the response is known not to be ended (its headers were just set). A response on another kind
 * of connection (a test harness's mock socket, HTTP/2), one that may be ended already, and every response
 * until the channel has been heard from are listened to as `responseEnded` does.
 */
export function whenEnded(res: ResponseToEnd, socket: unknown, open: boolean, done: () => void): void {
  if (!subscribed) {
    subscribed = true;
    subscribe('http.server.response.finish', onFinish);
  }
  if (!heard || !open || !(socket instanceof Socket) || socket.destroyed) {
    responseEnded(res, done);
    return;
  }
  const first = waiting.get(socket);
  if (first === undefined) socket.once('close', onClose);
  waiting.set(socket, { res, done, piping: pipedInto(res), next: first ?? undefined });
}
