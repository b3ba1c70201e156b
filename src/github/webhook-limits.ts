import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';

/**
 * Limits of the webhook server. Anyone on the network can open connections to it and POST to it;
 * only the signature check (which needs the whole body) tells GitHub from a stranger. So the body
 * is bounded before it is read, the time a request may take is bounded, and so are the connections.
 */
export interface WebhookLimits {
  /** GitHub caps webhook payloads at 25 MB; anything larger is not from GitHub. */
  maxBodyBytes: number;
  /** Bodies being read at once, together: many parallel 25 MB bodies must not exhaust memory. */
  maxInFlightBodyBytes: number;
  /** All request headers must arrive within this. */
  headersTimeoutMs: number;
  /** The whole request, body included, must arrive within this (GitHub sends at once). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeoutMs: number;
  /** How often the server looks for connections past the two timeouts above. */
  checkIntervalMs: number;
  /** Open connections at most; more are refused until some close. */
  maxConnections: number;
}

const WEBHOOK_LIMITS: WebhookLimits = {
  maxBodyBytes: 25 * 1024 * 1024,
  maxInFlightBodyBytes: 100 * 1024 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  checkIntervalMs: 1_000,
  maxConnections: 1024,
};

/** What a request handler sees once the guard has read the body: the raw bytes, for the signature. */
export type GuardedRequest = IncomingMessage & { rawBody?: Buffer | undefined; body?: unknown };

export type RequestHandler = (req: GuardedRequest, res: ServerResponse) => void | Promise<void>;

/**
 * An http server whose handler only ever sees requests whose body arrived whole and within the
 * limits, already read into `req.rawBody` (where @octokit/webhooks' middleware takes it from,
 * instead of reading the stream itself without a limit).
 */
export function createLimitedServer(handler: RequestHandler, limits: WebhookLimits = WEBHOOK_LIMITS): Server {
  const options: ServerOptions = {
    headersTimeout: limits.headersTimeoutMs,
    requestTimeout: limits.requestTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
  };
  const budget = { inFlight: 0 };
  const server = createServer(options, (req, res) => {
    void readBounded(req, res, limits, budget).then((ok) => (ok ? handler(req, res) : undefined));
  });
  server.maxConnections = limits.maxConnections;
  // Sockets idle for as long as a whole request may take are dead weight.
  server.timeout = limits.requestTimeoutMs;
  return server;
}

/** Reads the body into req.rawBody; on any limit answers itself (413, 503) and resolves false. */
function readBounded(req: GuardedRequest, res: ServerResponse, limits: WebhookLimits, budget: { inFlight: number }): Promise<boolean> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  if (declared > limits.maxBodyBytes) {
    refuse(req, res, 413, `request bodies are limited to ${limits.maxBodyBytes} bytes`);
    return Promise.resolve(false);
  }
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (ok: boolean) => {
      budget.inFlight -= size;
      size = 0;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onClose);
      resolve(ok);
    };
    const onData = (chunk: Buffer) => {
      if (size + chunk.length > limits.maxBodyBytes) {
        refuse(req, res, 413, `request bodies are limited to ${limits.maxBodyBytes} bytes`);
        finish(false);
      } else if (budget.inFlight + chunk.length > limits.maxInFlightBodyBytes) {
        refuse(req, res, 503, 'too many large requests at once; try again later');
        finish(false);
      } else {
        size += chunk.length;
        budget.inFlight += chunk.length;
        chunks.push(chunk);
      }
    };
    const onEnd = () => {
      req.rawBody = Buffer.concat(chunks);
      // @octokit/webhooks takes rawBody only when `body` is an object (a framework's parsed body).
      req.body = {};
      finish(true);
    };
    // The client went away, or the server's request timeout destroyed the request.
    const onClose = () => finish(false);
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('close', onClose);
  });
}

/**
 * How long a refused connection stays half-closed before it is destroyed: time for a client still
 * sending its body to read the answer. Destroying a socket with unread data sends a reset, and the
 * reset throws the answer away on the client's side before it has read it.
 */
const REFUSED_LINGER_MS = 2000;

/** Answers and closes the connection, without reading the rest of the body. */
function refuse(req: IncomingMessage, res: ServerResponse, status: number, message: string): void {
  // Read no more of what is left of the body: the client's writes stall once the buffers fill.
  req.pause();
  const socket = req.socket;
  if (res.headersSent) {
    socket.destroy();
    return;
  }
  // Node's server ends a `connection: close` answer with socket.destroySoon(), which destroys the
  // socket as soon as the answer is written: with the body unread, that is the reset. Here the
  // socket stops reading, half-closes (FIN after the answer) and is destroyed after the linger.
  socket.destroySoon = () => {
    socket.pause();
    socket.end();
    setTimeout(() => socket.destroy(), REFUSED_LINGER_MS).unref();
  };
  res.writeHead(status, { 'content-type': 'application/json', connection: 'close' });
  res.end(JSON.stringify({ error: message }));
}
