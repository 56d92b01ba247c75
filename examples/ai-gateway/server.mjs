/**
 * An AI gateway: an Express proxy in front of a language model (here the fake one in model.mjs) that gives
 * every API key (`Authorization: Bearer <key>`) a budget of requests and of tokens a minute, as the model
 * providers do:
 * - `fixedWindow:10/1m@requests` and `slidingWindow:2000/1m@tokens`, one call admitted by both or neither;
 * - before calling the model it reserves the most the call can use: 1 request and, for tokens, the
 *   prompt's tokens + `max_tokens` (512, the model's most, when the client sends none: the gateway then
 *   sends the model that cap, so the answer never outgrows what was reserved);
 * - it passes the model's answer through as it comes (server-sent events with `stream: true`), reads the
 *   `usage` the model reports at its end, and settles: the key is charged the tokens truly used, and the
 *   rest of the reservation is given back;
 * - a client that leaves mid-stream: the gateway stops the model's answer, no usage arrives, and the
 *   reservation stands (the model may have written more than it sent; the reservation is its bound);
 * - a call the model refused or never answered costs no tokens (settled at 0);
 * - OpenAI's headers (`x-ratelimit-remaining-tokens`, ...) and, over budget, 429 with `Retry-After` and
 *   an OpenAI-style error body.
 *
 * Run: node examples/ai-gateway/server.mjs
 * Environment:
 * - PORT: default 3010.
 * - MODEL_URL: the model's base URL (e.g. http://localhost:3011, `node examples/ai-gateway/model.mjs`);
 *   without it the gateway starts the fake model in this process, on a free port of 127.0.0.1.
 * - REDIS_URL (e.g. redis://127.0.0.1:6379): keep the budgets in Redis, shared by every gateway process.
 *   Without it they live in this process's memory.
 */
import { once } from 'node:events'
import { rateLimit } from '@sluice/express'
import express from 'express'
import { createModelServer, error, MAX_OUTPUT_TOKENS, promptTokens } from './model.mjs'
import { usageOf, usageReader } from './usage.mjs'

/** Each key's budget a minute. */
const REQUESTS_PER_MINUTE = 10
const TOKENS_PER_MINUTE = 2000

const redis = process.env.REDIS_URL ? await connectRedis(process.env.REDIS_URL) : undefined
const model = process.env.MODEL_URL ? undefined : await startModel()
const modelUrl = process.env.MODEL_URL ?? `http://127.0.0.1:${model.address().port}`

async function connectRedis(url) {
  // Loaded only when asked for: the gateway on the memory store needs neither ioredis nor @sluice/redis.
  const [{ Redis }, { RedisStore }] = await Promise.all([import('ioredis'), import('@sluice/redis')])
  const client = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 })
  await new Promise((resolve, reject) => {
    client.once('ready', resolve)
    client.once('error', (e) => reject(new Error(`Cannot reach Redis at ${url}: ${e.message}`)))
  })
  client.on('error', () => {})
  // A model takes seconds to answer, so a store call may take up to one before it counts as failed
  // (then `onStoreError`'s default lets the call through unmetered; `'deny'` would refuse it).
  return { client, store: new RedisStore({ client, timeoutMs: 1000 }) }
}

async function startModel() {
  const server = createModelServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  return server
}

const app = express()
app.disable('x-powered-by')

/** The caller's API key, from `Authorization: Bearer <key>`; 401 without one. */
function authenticate(req, res, next) {
  const match = /^Bearer ([\x21-\x7e]{1,200})$/.exec(req.get('authorization') ?? '')
  if (match === null) {
    const message = 'Send your API key as `Authorization: Bearer <key>`.'
    return res.status(401).json(error(message, 'invalid_request_error', 'invalid_api_key'))
  }
  res.locals.apiKey = match[1]
  next()
}

/**
 * Checks the body and works out the most this call can cost (`res.locals.estimate`); 400 for a body the
 * model would refuse, or a call larger than a whole minute's budget (it could never be admitted).
 */
function estimate(req, res, next) {
  const body = req.body
  const messages = body?.messages
  if (
    !Array.isArray(messages) ||
    messages.length === 0 ||
    !messages.every((m) => typeof m?.role === 'string' && typeof m?.content === 'string')
  ) {
    return invalid(res, '`messages` must be a non-empty list of { role, content } with string contents.')
  }
  const maxTokens = body.max_tokens ?? MAX_OUTPUT_TOKENS
  if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > MAX_OUTPUT_TOKENS) {
    return invalid(res, `\`max_tokens\` must be an integer from 1 to ${MAX_OUTPUT_TOKENS}.`)
  }
  const tokens = promptTokens(messages) + maxTokens
  if (tokens > TOKENS_PER_MINUTE) {
    const detail = `This call may use ${tokens} tokens, more than the ${TOKENS_PER_MINUTE} a minute your key has.`
    return invalid(res, detail, 'request_too_large')
  }
  res.locals.maxTokens = maxTokens
  res.locals.estimate = { requests: 1, tokens }
  next()
}

function invalid(res, message, code = null) {
  res.status(400).json(error(message, 'invalid_request_error', code))
}

const budget = rateLimit({
  prefix: 'ai',
  rules: [`fixedWindow:${REQUESTS_PER_MINUTE}/1m@requests`, `slidingWindow:${TOKENS_PER_MINUTE}/1m@tokens`],
  ...(redis && { store: redis.store }),
  key: (req) => req.res.locals.apiKey,
  cost: (req) => req.res.locals.estimate,
  headers: 'openai',
  onLimited(_req, res, decision) {
    const seconds = Math.max(1, Math.ceil(decision.retryAfterMs / 1000))
    const message =
      `Rate limit reached for ${decision.rule} per min: limit ${decision.limit}, ` +
      `remaining ${decision.remaining}. Please try again in ${seconds}s.`
    res.json(error(message, decision.rule, 'rate_limit_exceeded'))
  },
})

app.post(
  '/v1/chat/completions',
  authenticate,
  express.json({ limit: '64kb' }),
  estimate,
  budget,
  async (req, res) => {
    // Settled before the end of the answer is passed on, so a call made after it sees the settle. A
    // failed settle keeps the reservation: the key was charged the most, never less.
    const settle = (tokens) =>
      req.rateLimit.settle({ tokens }).catch((e) => console.error('settle failed:', e))
    // A client that leaves stops the model: nothing more is generated for a client who is gone.
    const upstream = new AbortController()
    res.once('close', () => {
      if (!res.writableFinished) upstream.abort()
    })
    const stream = req.body.stream === true
    let answer
    try {
      answer = await fetch(`${modelUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
          ...req.body,
          max_tokens: res.locals.maxTokens,
          ...(stream && { stream_options: { include_usage: true } }),
        }),
        signal: upstream.signal,
      })
    } catch (e) {
      if (upstream.signal.aborted) return
      // The model was not reached: the call used nothing.
      console.error('the model could not be reached:', e)
      await settle(0)
      return res.status(502).json(error('The model could not be reached.', 'server_error'))
    }
    // The model's answer is passed on as it is: its status, its type, its bytes.
    res.status(answer.status)
    res.setHeader('Content-Type', answer.headers.get('content-type') ?? 'application/json')
    if (!answer.ok) {
      // The model refused the call: it used nothing.
      const body = Buffer.from(await answer.arrayBuffer())
      await settle(0)
      return res.end(body)
    }
    if (!stream) {
      let text
      try {
        text = await answer.text()
      } catch (e) {
        if (upstream.signal.aborted) return
        throw e
      }
      const usage = usageOf(text)
      if (usage !== undefined) await settle(usage.total_tokens)
      return res.end(text)
    }
    res.setHeader('Cache-Control', 'no-cache')
    res.flushHeaders()
    const reader = usageReader()
    const decoder = new TextDecoder()
    try {
      for await (const piece of answer.body) {
        const usage = reader.push(decoder.decode(piece, { stream: true }))
        if (usage !== undefined) await settle(usage.total_tokens)
        if (!res.write(piece)) await once(res, 'drain', { signal: upstream.signal })
      }
      res.end()
    } catch (e) {
      // The client left (the reservation stands), or the model broke off: end what was sent.
      if (!upstream.signal.aborted) {
        console.error('the model broke off:', e)
        res.end()
      }
    }
  },
)

// What failed here (a body that is not JSON, the store): 400 or 500, as OpenAI answers them.
app.use((e, _req, res, next) => {
  if (res.headersSent) return next(e)
  if (e.type === 'entity.parse.failed') {
    return invalid(res, 'The body must be JSON.')
  }
  console.error(e)
  res.status(500).json(error('The gateway failed.', 'server_error'))
})

const server = app.listen(Number(process.env.PORT ?? 3010), () => {
  const url = `http://localhost:${server.address().port}`
  const where = redis ? `in Redis at ${process.env.REDIS_URL}` : 'in memory'
  const call = (body) =>
    `curl -sN ${url}/v1/chat/completions -H 'Authorization: Bearer sk-demo' -H 'Content-Type: application/json' -d '${JSON.stringify(body)}'`
  const messages = [{ role: 'user', content: 'What is a sluice?' }]
  console.log(`sluice AI gateway on ${url}, model at ${modelUrl}, budgets ${where}

  # a streamed answer: 1 request and 4 + 100 tokens reserved, then settled to the 4 + 45 used
  ${call({ model: 'sluice-fake-1', messages, max_tokens: 100, stream: true })} -D -

  # the next call's headers show what the settle gave back: x-ratelimit-remaining-tokens
  ${call({ model: 'sluice-fake-1', messages, max_tokens: 100 })} -D - -o /dev/null`)
})

function shutdown() {
  server.close()
  server.closeAllConnections()
  model?.close()
  model?.closeAllConnections()
  redis?.client.disconnect()
}
process.once('SIGINT', shutdown)
process.once('SIGTERM', shutdown)
