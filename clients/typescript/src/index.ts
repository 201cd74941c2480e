/**
 * A thin typed client of a Wovyr server's HTTP API (Node 20+, browsers: `fetch`).
 *
 * The types are generated from the server's OpenAPI document (`docs/openapi.json`) by
 * openapi-typescript into `schema.ts` (`npm run generate`); this module only adds the
 * calls people make most: start, get, list (and iterate every page), signal, cancel and
 * wait for the end. Anything else: `request()` with the generated types.
 *
 *     const wovyr = new WovyrClient({ baseUrl: "http://127.0.0.1:8080", apiKey: "wvr_..." });
 *     const run = await wovyr.start({ workflow: "order", input: { order_id: "A-1" } });
 *     const done = await wovyr.wait(run.id, { timeoutMs: 60_000 });
 */

import type { components, operations } from "./schema.js";

export type { components, operations, paths } from "./schema.js";

type Schemas = components["schemas"];
export type Execution = Schemas["ExecutionDetail"];
export type ExecutionSummary = Schemas["ExecutionSummary"];
export type ExecutionPage = Schemas["ExecutionPage"];
export type StartRequest = Schemas["StartRequest"];
export type Problem = Schemas["Problem"];
export type ListQuery = NonNullable<operations["listExecutions"]["parameters"]["query"]>;

/** What `wait` waits for. */
export const ENDED: ReadonlySet<string> = new Set(["completed", "failed", "cancelled"]);

/** An error answer: `status` and the server's RFC 9457 problem document. */
export class WovyrError extends Error {
  readonly status: number;
  readonly problem: Problem | undefined;
  readonly retryAfter: number | undefined;

  constructor(status: number, problem: Problem | undefined, retryAfter?: number) {
    super(problem?.detail ?? `HTTP ${status}`);
    this.name = "WovyrError";
    this.status = status;
    this.problem = problem;
    this.retryAfter = retryAfter;
  }
}

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** A key (`wvr_...`): its tenant and role decide what it may see and do. */
  apiKey?: string;
  /** More tries after a 429 or 503 (default 3); each waits the answer's `Retry-After`. */
  retries?: number;
  /** A `Retry-After` over this many seconds is not waited for (default 60). */
  maxWaitSeconds?: number;
  fetch?: typeof fetch;
}

export interface RequestOptions {
  query?: Record<string, string | number | boolean | string[] | null | undefined>;
  body?: unknown;
  headers?: Record<string, string>;
}

// Asked again after a 503 (the store unavailable: whether it took effect is unknown).
const REPEATABLE = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

export class WovyrClient {
  readonly baseUrl: string;
  private readonly apiKey: string | undefined;
  private readonly retries: number;
  private readonly maxWaitSeconds: number;
  private readonly fetcher: typeof fetch;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.retries = options.retries ?? 3;
    this.maxWaitSeconds = options.maxWaitSeconds ?? 60;
    this.fetcher = options.fetch ?? fetch;
  }

  /** Start an inline `definition` or the registered `workflow` (201; 200: it existed). */
  start(body: StartRequest, options: { idempotencyKey?: string } = {}): Promise<Execution> {
    const headers: Record<string, string> = {};
    if (options.idempotencyKey) headers["Idempotency-Key"] = options.idempotencyKey;
    return this.request<Execution>("POST", "/api/v1/workflows", { body, headers });
  }

  get(executionId: string): Promise<Execution> {
    return this.request<Execution>("GET", `/api/v1/workflows/${part(executionId)}`);
  }

  /** One page of executions, newest first: pass `next_cursor` back as `cursor`. */
  list(query: ListQuery = {}): Promise<ExecutionPage> {
    return this.request<ExecutionPage>("GET", "/api/v1/workflows", { query });
  }

  /** Every execution the filters select, newest first, a page at a time. */
  async *iterate(query: Omit<ListQuery, "cursor"> = {}): AsyncGenerator<ExecutionSummary> {
    let cursor: string | null | undefined = undefined;
    do {
      const page: ExecutionPage = await this.list({ ...query, cursor });
      yield* page.items;
      cursor = page.next_cursor;
    } while (cursor);
  }

  signal(executionId: string, name: string, payload?: unknown): Promise<Execution> {
    const path = `/api/v1/workflows/${part(executionId)}/signal`;
    return this.request<Execution>("POST", path, { body: { name, payload: payload ?? null } });
  }

  /** Cancel: durable when this returns; a 409 `WovyrError` when it had already ended. */
  cancel(executionId: string, reason?: string): Promise<Execution> {
    const path = `/api/v1/workflows/${part(executionId)}/cancel`;
    return this.request<Execution>("POST", path, { body: reason ? { reason } : {} });
  }

  /** The execution once it has ended (`completed`, `failed` or `cancelled`: check
   * `status`; the result is `output`). Rejects after `timeoutMs` (default: never). */
  async wait(
    executionId: string,
    options: { timeoutMs?: number; intervalMs?: number } = {},
  ): Promise<Execution> {
    const interval = options.intervalMs ?? 1000;
    const deadline = options.timeoutMs === undefined ? undefined : Date.now() + options.timeoutMs;
    let pause = Math.min(50, interval);
    for (;;) {
      const execution = await this.request<Execution>(
        "GET",
        `/api/v1/workflows/${part(executionId)}`,
        { query: { events: 0 } },
      );
      if (ENDED.has(execution.status)) return execution;
      if (deadline !== undefined && Date.now() + pause > deadline) {
        throw new Error(`execution ${executionId} is still ${execution.status}`);
      }
      await sleep(pause);
      pause = Math.min(pause * 2, interval);
    }
  }

  /** Any operation: JSON in and out, problems as `WovyrError`, 429/503 asked again. */
  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const url = new URL(this.baseUrl + path);
    for (const [name, value] of Object.entries(options.query ?? {})) {
      if (value === null || value === undefined) continue;
      for (const one of Array.isArray(value) ? value : [value]) {
        url.searchParams.append(name, String(one));
      }
    }
    const headers: Record<string, string> = { Accept: "application/json", ...options.headers };
    if (this.apiKey) headers["Authorization"] = `Bearer ${this.apiKey}`;
    let body: string | undefined;
    if (options.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    for (let tried = 0; ; tried++) {
      const response = await this.fetcher(url, { method, headers, body });
      if (response.ok) {
        return (response.status === 204 ? undefined : await response.json()) as T;
      }
      const wait = retryAfter(response);
      const repeatable =
        response.status === 429 || REPEATABLE.has(method) || "Idempotency-Key" in headers;
      if (
        tried < this.retries &&
        (response.status === 429 || response.status === 503) &&
        repeatable &&
        wait <= this.maxWaitSeconds
      ) {
        await sleep(wait * 1000);
        continue;
      }
      let problem: Problem | undefined;
      try {
        problem = (await response.json()) as Problem;
      } catch {
        problem = undefined; // not a problem document (a proxy's page)
      }
      throw new WovyrError(response.status, problem, wait);
    }
  }
}

function part(value: string): string {
  return encodeURIComponent(value);
}

function retryAfter(response: Response): number {
  const seconds = Number(response.headers.get("Retry-After") ?? "1");
  return Number.isFinite(seconds) && seconds >= 0 ? seconds : 1;
}
