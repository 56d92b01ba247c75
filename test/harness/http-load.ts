/**
 * @module A bounded HTTP load generator for the reliability suite: keep-alive GETs from a fixed number of
 * lanes, each request's answer recorded with the client-side time it took. Every loop stops at a request
 * count and a deadline, whichever comes first; every request has a client-side timeout.
 */
import { Agent, request } from 'node:http'
import { performance } from 'node:perf_hooks'

export interface Answer {
  /** The `x-user` header the request carried. */
  readonly key: string
  /** HTTP status, or 0 when no answer came (connection error or client timeout; see `error`). */
  readonly status: number
  readonly headers: Record<string, string | string[] | undefined>
  /** The JSON body, or undefined when it was not JSON. */
  readonly body: Record<string, unknown> | undefined
  /** When the request was sent, by `performance.now()`. */
  readonly sentAt: number
  /** Client-side ms from send to the end of the answer. */
  readonly ms: number
  readonly error?: string
}

/** Longest the client waits for one answer; a request still open then is recorded with an error. */
const CLIENT_TIMEOUT_MS = 5000

const agents = new Set<Agent>()

/** A keep-alive agent for up to `sockets` connections; destroyed by `closeAgents()`. */
export function agent(sockets: number): Agent {
  const a = new Agent({ keepAlive: true, maxSockets: sockets })
  agents.add(a)
  return a
}

export function closeAgents(): void {
  for (const a of agents) a.destroy()
  agents.clear()
}

/** One GET of `path` with `x-user: key` (and any other headers). Never rejects. */
export function get(
  base: string,
  path: string,
  key: string,
  via: Agent,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const sentAt = performance.now()
  return new Promise((resolve) => {
    const done = (status: number, h: Answer['headers'], text: string, error?: string) => {
      let body: Record<string, unknown> | undefined
      try {
        body = JSON.parse(text)
      } catch {}
      resolve({
        key,
        status,
        headers: h,
        body,
        sentAt,
        ms: performance.now() - sentAt,
        ...(error === undefined ? {} : { error }),
      })
    }
    const req = request(`${base}${path}`, { agent: via, headers: { 'x-user': key, ...headers } }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (chunk: string) => {
        text += chunk
      })
      res.on('end', () => done(res.statusCode ?? 0, res.headers, text))
      res.on('error', (error) => done(0, {}, '', error.message))
    })
    req.setTimeout(CLIENT_TIMEOUT_MS, () => req.destroy(new Error('client timeout')))
    req.on('error', (error) => done(0, {}, '', error.message))
    req.end()
  })
}

export interface LoadOptions {
  /** Requests outstanding at once. */
  lanes: number
  /** Most requests in all. */
  maxRequests: number
  /** Stop sending after this many ms, whatever `until` says. */
  maxMs: number
  /** The key of the n-th request. */
  keyOf: (n: number) => string
}

export interface Load {
  /** Resolves with every answer once the lanes have stopped (after `stop()`, or at a bound). */
  readonly answers: Promise<Answer[]>
  stop(): void
}

/** Starts `lanes` loops of GETs on `base + path`, until stopped or a bound is reached. */
export function startLoad(base: string, path: string, options: LoadOptions): Load {
  const via = agent(options.lanes)
  const answers: Answer[] = []
  const deadline = performance.now() + options.maxMs
  let sent = 0
  let stopped = false
  const lane = async () => {
    while (!stopped && sent < options.maxRequests && performance.now() < deadline) {
      const key = options.keyOf(sent++)
      answers.push(await get(base, path, key, via))
    }
  }
  const lanes = Array.from({ length: options.lanes }, lane)
  return {
    answers: Promise.all(lanes).then(() => answers),
    stop() {
      stopped = true
    },
  }
}
