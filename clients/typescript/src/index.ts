// prioq-client: a typed client of prioq's HTTP API, and a worker helper and
// a producer's back-off (`enqueue`) on top of it. The types come from src/schema.ts, which openapi-typescript
// generates from openapi/openapi.json (scripts/gen-clients); the requests go
// through openapi-fetch. Nothing here needs Node.js: the Node-only parts of
// a worker (signals, the host-pid name) are in prioq-client/node.

import createFetchClient, { type Client } from 'openapi-fetch';

import type { components, operations, paths } from './schema.js';

export type { components, operations, paths };
export { Rejection, Worker } from './worker.js';
export { enqueue } from './producer.js';
export type { EnqueueOptions, NewJob } from './producer.js';
export type { Report, Task, WorkerEvent, WorkerOptions } from './worker.js';

/** Every request and answer body of the API, by its name in the OpenAPI document. */
export type Schemas = components['schemas'];
/** A job, as every endpoint that returns one shows it. */
export type JobView = Schemas['JobView'];
/** An RFC 9457 problem: the body of every error answer. */
export type Problem = Schemas['Problem'];
/** The machine-readable `code` of a problem. */
export type ProblemCode = Schemas['ProblemCode'];

/**
 * A client of one prioq: `client.POST('/v1/queues/{queue}/jobs', { params:
 * { path: { queue } }, body })` answers `{ data }` or `{ error }` (a
 * Problem), both typed after the path and method, with the `response`.
 */
export type PrioqClient = Client<paths>;

/** How to reach prioq, besides its address. */
export interface ClientOptions {
  /** An API token, sent as `Authorization: Bearer`, when prioq runs with PRIOQ_API_TOKENS. */
  token?: string | undefined;
  /** The fetch to send requests with; the global one by default. */
  fetch?: ((request: Request) => Promise<Response>) | undefined;
}

/**
 * Makes a client of the prioq at `baseUrl` (e.g. `http://127.0.0.1:8080`),
 * sending `token` with every request when one is given.
 */
export function createClient(baseUrl: string, options: ClientOptions = {}): PrioqClient {
  const { token, fetch } = options;
  return createFetchClient<paths>({
    baseUrl: baseUrl.replace(/\/+$/, ''),
    headers: token ? { Authorization: `Bearer ${token}` } : {},
    ...(fetch ? { fetch } : {}),
  });
}
