// The shared suites drive a request listener with supertest; this one hands each request to a framework's own
// test client (fastify.inject, Hono's app.request), so the suites run through it unchanged.
import type { IncomingHttpHeaders, IncomingMessage, OutgoingHttpHeaders, RequestListener } from 'node:http';

/** A request as the test client gets it: the socket's peer address stands in for the connection. */
export interface ClientRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer | undefined;
  remoteAddress: string;
  /** The real request, for clients that take the Node request itself as a binding. */
  incoming: IncomingMessage;
}

export interface ClientResponse {
  status: number;
  headers: OutgoingHttpHeaders;
  body: Buffer;
}

/** Hop-by-hop fields the client computed for its own (absent) connection; Node writes its own. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding']);

/** A listener that reads each request, passes it to `send` and writes what it answers. */
export function viaTestClient(send: (request: ClientRequest) => Promise<ClientResponse>): RequestListener {
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      send({
        method: req.method ?? 'GET',
        url: req.url ?? '/',
        headers: req.headers,
        body: chunks.length > 0 ? Buffer.concat(chunks) : undefined,
        remoteAddress: req.socket.remoteAddress ?? '127.0.0.1',
        incoming: req,
      }).then(
        ({ status, headers, body }) => {
          for (const [name, value] of Object.entries(headers))
            if (value !== undefined && !HOP_BY_HOP.has(name.toLowerCase())) res.setHeader(name, value);
          res.setHeader('content-length', body.length);
          res.writeHead(status).end(body);
        },
        (error: unknown) => {
          res.writeHead(599).end(String(error));
        },
      );
    });
  };
}
