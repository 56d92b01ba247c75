/**
 * @module Real HTTP for the dashboard's tests: a `node:http` server on a free loopback port, and requests
 * sent with `node:http` so every header (`Origin`, `Sec-Fetch-Site`, `Content-Length`) is exactly what the
 * test says.
 */
import { createServer, type IncomingMessage, request, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface Reply {
  status: number
  headers: IncomingMessage['headers']
  text: string
  // biome-ignore lint/suspicious/noExplicitAny: a parsed JSON body, read by the tests field by field
  json: any
}

const servers = new Set<Server>()

/** Serves `handler` on 127.0.0.1; returns its base URL (no trailing slash). */
export async function serve(
  handler: (req: IncomingMessage, res: ServerResponse) => unknown,
): Promise<string> {
  const server = createServer((req, res) => void handler(req, res))
  servers.add(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

export async function closeServers(): Promise<void> {
  await Promise.all(
    [...servers].map(
      (server) =>
        new Promise<void>((resolve) => {
          server.close(() => resolve())
          server.closeAllConnections()
        }),
    ),
  )
  servers.clear()
}

export interface SendOptions {
  method?: string
  headers?: Record<string, string>
  body?: string | Buffer
}

/** One request; resolves with the whole reply (or the status alone when the server closed early). */
export function send(url: string, options: SendOptions = {}): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (c: Buffer) => chunks.push(c))
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8')
        let json: unknown
        try {
          json = JSON.parse(text)
        } catch {
          json = undefined
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json })
      })
      res.on('error', reject)
    })
    // A server that answers before reading the whole body may close while it is still being sent.
    req.on('error', reject)
    if (options.body !== undefined) req.write(options.body)
    req.end()
  })
}

/** The headers a write from the page itself carries. */
export function pageWrite(url: string, csrf: string): Record<string, string> {
  return {
    'content-type': 'application/json',
    'x-sluice-csrf': csrf,
    origin: new URL(url).origin,
    'sec-fetch-site': 'same-origin',
  }
}

/** The CSRF token of the page at `pageUrl`, as the page's script reads it. */
export async function csrfOf(pageUrl: string, headers: Record<string, string> = {}): Promise<string> {
  const page = await send(pageUrl, { headers })
  const match = /<meta name="sluice-csrf" content="([^"]*)">/.exec(page.text)
  if (match === null) throw new Error(`no csrf meta in the page at ${pageUrl} (${page.status})`)
  return match[1]!
}
