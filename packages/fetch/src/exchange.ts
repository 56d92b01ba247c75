/**
 * @module The Fetch API's side of core's HTTP kit, shared by `fetchLimit` and by adapters of frameworks
 * built on `Request → Response` (Hono): a per-request exchange whose end signal is the request's `signal`
 * aborting (the client left) or the response body read to its end or cancelled; rate-limit headers added
 * to a `Response`, also an immutable one; and the `Response` of a denied or rejected request.
 */
import type { RuleCosts } from '@sluice/core'
import {
  buildRequestLimit,
  type HttpAdapter,
  type ParsedHttpOptions,
  type RequestLimit,
  type RequestRecord,
  type RequestView,
  type ResponseBody,
} from '@sluice/core/http'

/**
 * One request's passage through a limit, as the kit's response (`Res`). Its end signal (`watch`) is
 * asked for only when something must run at the response's end (a concurrency lease, `countWhen`, a
 * hold): a response whose end nobody watches is passed on with its body untouched.
 */
export class FetchExchange {
  /** The handler's response, once it has answered (what `countWhen` is asked about). */
  response: Response | undefined = undefined
  readonly #request: { readonly signal: AbortSignal } | undefined
  #signal: AbortSignal | undefined = undefined
  #ended: ((finished: boolean) => void) | undefined = undefined
  #over = false
  readonly #left = () => this.#end(false)

  /**
   * `request`: whose `signal` aborts when its client goes away (Bun, Deno, `@hono/node-server`). The
   * signal is read only when the end is watched: on some servers (`@hono/node-server`) reading it builds
   * the whole `Request`, which a request nobody watches never needs.
   */
  constructor(request?: { readonly signal: AbortSignal }) {
    this.#request = request
  }

  /**
   * The kit's end signal (`HttpAdapter.onEnd`): `ended(finished)` runs once, `false` when the request's
   * signal aborts before the response has been read (at once if it already has), or its body is cancelled;
   * `true` when the body has been read to its end, or when there is no body to read.
   */
  watch(ended: (finished: boolean) => void): void {
    this.#ended = ended
    const signal = this.#request?.signal
    this.#signal = signal
    if (signal === undefined) return
    if (signal.aborted) this.#end(false)
    else signal.addEventListener('abort', this.#left, { once: true })
  }

  /**
   * The handler answered `response`: adds `headers`, and when the end is watched, ends with the body (a
   * streamed body is wrapped, so the request lasts as long as its stream) or at once when there is none.
   */
  respond(response: Response, headers: Readonly<Record<string, string>> | undefined): Response {
    const answer = headers === undefined ? response : withHeaders(response, headers)
    this.response = answer
    if (this.#ended === undefined || this.#over) return answer
    const body = answer.body
    if (body === null || !rebuildable(answer)) {
      this.#end(true)
      return answer
    }
    return new Response(
      watchBody(body, (finished) => this.#end(finished)),
      {
        status: answer.status,
        statusText: answer.statusText,
        headers: answer.headers,
      },
    )
  }

  /** Nothing will be sent from here (the handler threw, the client left): the request ends unfinished. */
  abandon(): void {
    this.#end(false)
  }

  #end(finished: boolean): void {
    if (this.#over) return
    this.#over = true
    this.#signal?.removeEventListener('abort', this.#left)
    this.#ended?.(finished)
  }
}

/**
 * An adapter of the kit for a framework on the Fetch API: `view` reads its request (`Req`: a `Request`,
 * Hono's `Context`); records live in a WeakMap on that request, so stacked limits of this adapter count
 * a request once each and render their headers together. Make one per framework, not one per limit.
 */
export function fetchAdapter<Req extends object>(view: RequestView<Req>): HttpAdapter<Req, FetchExchange> {
  const records = new WeakMap<Req, RequestRecord>()
  return {
    view,
    recordOf: (req) => records.get(req),
    keepRecord: (req, record) => {
      records.set(req, record)
    },
    onEnd: (exchange, ended) => exchange.watch(ended),
  }
}

/**
 * The kit's request limit over `FetchExchange`s. The user's `countWhen` and `settle` are written over a
 * `Response`: they are asked once the response has been read (or abandoned), with the response the
 * exchange holds (`settle` may see none: the client left before the handler answered).
 */
export function exchangeLimit<Req extends object>(
  parsed: ParsedHttpOptions<Req, FetchExchange>,
  adapter: HttpAdapter<Req, FetchExchange>,
): RequestLimit<Req, FetchExchange> {
  const countWhen = parsed.countWhen as ((request: Req, response: Response) => boolean) | undefined
  const settle = parsed.settle as FetchSettle<Req> | undefined
  if (countWhen === undefined && settle === undefined) return buildRequestLimit(parsed, adapter)
  return buildRequestLimit(
    {
      ...parsed,
      countWhen:
        countWhen === undefined ? undefined : (request, exchange) => countWhen(request, exchange.response!),
      settle:
        settle === undefined
          ? undefined
          : (request, exchange, finished) => settle(request, exchange.response, finished),
    },
    adapter,
  )
}

/**
 * The `settle` option as a Fetch user writes it: over the `Response` the handler answered, undefined when
 * the client left before it answered (`finished` is then false).
 */
export type FetchSettle<Req> = (
  request: Req,
  response: Response | undefined,
  finished: boolean,
) => number | RuleCosts | undefined | Promise<number | RuleCosts | undefined>

/**
 * `response` with `headers` set: in place when its headers may change, else (`Response.redirect`, a
 * `fetch()` answer: immutable headers) a new `Response` with the same status and body.
 */
export function withHeaders(response: Response, headers: Readonly<Record<string, string>>): Response {
  try {
    for (const name in headers) response.headers.set(name, headers[name]!)
    return response
  } catch {
    if (!rebuildable(response)) return response
    const copy = new Headers(response.headers)
    for (const name in headers) copy.set(name, headers[name]!)
    return new Response(response.body, {
      status: response.status,
      statusText: response.statusText,
      headers: copy,
    })
  }
}

/** A JSON answer of sluice's own (a 429's problem details, a 400 for a missing key part). */
export function jsonResponse(
  status: number,
  body: ResponseBody,
  contentType: string,
  headers?: Readonly<Record<string, string>>,
): Response {
  const all = new Headers(headers)
  all.set('content-type', contentType)
  return new Response(JSON.stringify(body), { status, headers: all })
}

/**
 * The answer to a held request whose client left: nobody receives it. 499 is the status proxies log for
 * a client that closed its request.
 */
export function departedResponse(): Response {
  return new Response(null, { status: 499 })
}

/**
 * Whether a response can be built anew with its status: not a network error (status 0) nor a protocol
 * switch (101, a WebSocket upgrade that the runtime recognises by its own object).
 */
function rebuildable(response: Response): boolean {
  return response.status >= 200 && response.status <= 599
}

/** `body`, read through: `ended(true)` once it has been read to its end, `ended(false)` if it is cancelled or fails. */
function watchBody(
  body: ReadableStream<Uint8Array>,
  ended: (finished: boolean) => void,
): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      let chunk: Awaited<ReturnType<typeof reader.read>>
      try {
        chunk = await reader.read()
      } catch (error) {
        ended(false)
        throw error
      }
      if (chunk.done) {
        controller.close()
        ended(true)
      } else controller.enqueue(chunk.value)
    },
    cancel(reason) {
      ended(false)
      return reader.cancel(reason)
    },
  })
}
