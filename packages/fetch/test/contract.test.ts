/**
 * The HTTP contract suite on `@sluice/fetch`, served by node:http through a bridge written here: each Node
 * request becomes a Fetch `Request` (its `signal` aborted when the client leaves before the response was
 * sent, as Bun.serve and Deno.serve do), and the `Response` is written back. Every route runs its limits as
 * nested `fetchLimit(...).handle` calls, given the route's template; when the suite trusts the proxy, the
 * client's address is the last `X-Forwarded-For` hop sent by a loopback peer. The same adapter on Bun and
 * Deno runs in test/runtimes.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { RequestRateLimit } from '@sluice/core/http'
import { type Decision, type FetchHandler, type FetchLimitOptions, fetchLimit } from '@sluice/fetch'
import { type ContractAdapter, type ContractRoute, httpContract } from '../../../test/http-contract/index.ts'

/** The client's address: the peer's, or behind a loopback proxy the last `X-Forwarded-For` hop. */
function clientIp(req: IncomingMessage, trustProxy: boolean): string | undefined {
  const peer = req.socket.remoteAddress
  const forwarded = req.headers['x-forwarded-for']
  if (!trustProxy || typeof forwarded !== 'string' || !/^(::ffff:)?127\.0\.0\.1$|^::1$/.test(peer ?? '')) {
    return peer
  }
  const hops = forwarded.split(',')
  return hops[hops.length - 1]!.trim()
}

/** Whether `pathname` matches the template `path` (`/items/:id`). */
function matches(path: string, pathname: string): boolean {
  const want = path.split('/')
  const got = pathname.split('/')
  return want.length === got.length && want.every((part, i) => part.startsWith(':') || part === got[i])
}

async function toRequest(req: IncomingMessage, res: ServerResponse): Promise<Request> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const departed = new AbortController()
  res.once('close', () => {
    if (!res.writableFinished) departed.abort()
  })
  const headers = new Headers()
  for (const [name, value] of Object.entries(req.headers)) {
    if (typeof value === 'string') headers.set(name, value)
    else if (Array.isArray(value)) for (const one of value) headers.append(name, one)
  }
  const hasBody = req.method !== 'GET' && req.method !== 'HEAD' && chunks.length > 0
  return new Request(`http://${req.headers.host ?? '127.0.0.1'}${req.url ?? '/'}`, {
    method: req.method ?? 'GET',
    headers,
    signal: departed.signal,
    ...(hasBody ? { body: Buffer.concat(chunks) } : {}),
  })
}

async function writeResponse(res: ServerResponse, response: Response): Promise<void> {
  const headers: Record<string, string> = {}
  response.headers.forEach((value, name) => {
    headers[name] = value
  })
  if (headers['content-type'] === 'text/plain' && response.body !== null) {
    // A streamed answer is written as it comes, and its body cancelled when the client leaves, as Bun.serve
    // and Deno.serve do.
    res.writeHead(response.status, headers)
    const reader = response.body.getReader()
    res.once('close', () => {
      if (!res.writableFinished) void reader.cancel()
    })
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      res.write(value)
    }
    res.end()
    return
  }
  const body = Buffer.from(await response.arrayBuffer())
  // A body of known length is sent with its length, as Bun.serve and Deno.serve send it.
  res.writeHead(response.status, { ...headers, 'content-length': String(body.length) })
  res.end(body)
}

function json(status: number, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })
}

const adapter: ContractAdapter = {
  name: 'fetch',
  where: 'fetchLimit',
  async start({ limits, routes, trustProxy }) {
    const chain = limits.map((o) => fetchLimit(o as FetchLimitOptions))
    const served = routes.map((route: ContractRoute) => {
      const last: FetchHandler = async (_request, decision) => {
        const reply = await route.handle(decision)
        if (reply.stream === undefined) return json(reply.status, reply.body)
        const body = ReadableStream.from(reply.stream).pipeThrough(new TextEncoderStream())
        return new Response(body, { status: reply.status, headers: { 'content-type': 'text/plain' } })
      }
      const route_ = `${route.method} ${route.path}`
      // Each limit wraps the next; the innermost runs the route's handler with the last decision made.
      type Next = (
        request: Request,
        ip: string | undefined,
        decision: RequestRateLimit | undefined,
      ) => Promise<Response>
      const handler = chain.reduceRight<Next>(
        (next, limit) => (request, ip, outer) =>
          limit.handle(request, { ip, route: route_ }, (_, decision) => next(request, ip, decision ?? outer)),
        async (request, _ip, decision) => last(request, decision),
      )
      return { route, handler }
    })
    const server = createServer((req, res) => {
      void (async () => {
        const request = await toRequest(req, res)
        const pathname = new URL(request.url).pathname
        const hit = served.find(
          ({ route }) =>
            (route.method === request.method || (route.method === 'GET' && request.method === 'HEAD')) &&
            matches(route.path, pathname),
        )
        const response = hit
          ? await hit.handler(request, clientIp(req, trustProxy === true), undefined)
          : json(404, { error: 'not found' })
        if (!res.destroyed) await writeResponse(res, response)
      })().catch((error: unknown) => {
        if (!res.headersSent) res.writeHead(500)
        res.end(String(error))
      })
    })
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve)
      server.once('error', reject)
      server.listen(0, '127.0.0.1')
    })
    const { port } = server.address() as AddressInfo
    return {
      url: `http://127.0.0.1:${port}`,
      close: () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        }),
    }
  },
  keyFromHeader: (header) => (request: Request) => request.headers.get(header) ?? undefined,
  countWhen: (when) => (_request: Request, response: Response) => when(response.status),
  onLimited: (answer) => async (_request: Request, decision: Decision) => {
    const reply = await answer(decision)
    return reply === undefined ? undefined : json(reply.status, reply.body)
  },
}

httpContract(adapter)
