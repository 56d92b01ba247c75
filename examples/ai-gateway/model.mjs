/**
 * A fake language model on node:http, speaking the OpenAI chat completions API well enough for the gateway
 * in front of it: `POST /v1/chat/completions` with `{ model, messages, max_tokens, stream }`. It is
 * deterministic, so a test can count on every figure: a token is a word (text split on whitespace), the
 * prompt is every message's content, and the answer is always the same passage of ANSWER.length words, cut
 * at `max_tokens` (`finish_reason: 'length'`) or whole (`'stop'`).
 *
 * With `stream: true` it answers server-sent events: a first chunk with the role, one chunk per word, a chunk
 * with the finish reason, a last chunk with no choices and the `usage` (`prompt_tokens`, `completion_tokens`,
 * `total_tokens`), then `data: [DONE]`, one word every MODEL_WORD_MS ms. A client that leaves stops the
 * stream, and no usage is sent. Without `stream` it answers one `chat.completion` with its usage.
 * `GET /v1/stats` tells what it was asked and what it sent, for tests.
 *
 * Run: node examples/ai-gateway/model.mjs (PORT, default 3011; MODEL_WORD_MS, default 20). The gateway
 * (server.mjs) starts one of its own when MODEL_URL is not set.
 */
import { createServer } from 'node:http'
import { pathToFileURL } from 'node:url'

/** The model's name, and the most tokens it writes in one answer. */
export const MODEL = 'sluice-fake-1'
export const MAX_OUTPUT_TOKENS = 512

/** What the model always answers: 45 words. */
export const ANSWER = (
  'A sluice is a gate that holds water back and lets it through at a measured rate. ' +
  'Upstream the level may rise as it likes; downstream only what the gate allows ever arrives, ' +
  'so the mill below turns at the pace it was built for.'
).split(' ')

/** The tokens in `text`: its words. */
export function countTokens(text) {
  return text.split(/\s+/).filter((word) => word !== '').length
}

/** The prompt's tokens: every message's content, whole. */
export function promptTokens(messages) {
  return messages.reduce((sum, m) => sum + countTokens(m.content), 0)
}

/**
 * The model's server, not listening yet. `wordMs`: the pause before each word of a streamed answer.
 * Its `stats()`: requests answered, streams whose client left, and the tokens sent, all requests together.
 */
export function createModelServer({ wordMs = 20 } = {}) {
  const stats = { requests: 0, streams: 0, left: 0, promptTokens: 0, completionTokens: 0 }
  let sequence = 0

  const server = createServer(async (req, res) => {
    if (req.method === 'GET' && req.url === '/v1/stats') return sendJson(res, 200, stats)
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      return sendJson(res, 404, error(`No route ${req.method} ${req.url}.`, 'not_found'))
    }
    const body = await readJson(req)
    const problem = checkRequest(body)
    if (problem !== undefined) return sendJson(res, 400, error(problem, 'invalid_request_error'))

    stats.requests++
    const id = `chatcmpl-${++sequence}`
    const prompt = promptTokens(body.messages)
    const limit = Math.min(body.max_tokens ?? MAX_OUTPUT_TOKENS, MAX_OUTPUT_TOKENS)
    const words = ANSWER.slice(0, limit)
    const finish = words.length < ANSWER.length ? 'length' : 'stop'
    const usage = {
      prompt_tokens: prompt,
      completion_tokens: words.length,
      total_tokens: prompt + words.length,
    }
    stats.promptTokens += prompt

    if (body.stream !== true) {
      stats.completionTokens += words.length
      return sendJson(res, 200, {
        id,
        object: 'chat.completion',
        created: 0,
        model: MODEL,
        choices: [
          {
            index: 0,
            message: { role: 'assistant', content: words.join(' ') },
            finish_reason: finish,
          },
        ],
        usage,
      })
    }

    stats.streams++
    let left = false
    res.once('close', () => {
      if (!res.writableFinished) {
        left = true
        stats.left++
      }
    })
    res.writeHead(200, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-cache',
      Connection: 'keep-alive',
    })
    const chunk = (choices, extra = {}) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: MODEL, choices, ...extra })}\n\n`
    res.write(chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]))
    for (const [i, word] of words.entries()) {
      await new Promise((resolve) => setTimeout(resolve, wordMs))
      if (left) return
      const content = i === 0 ? word : ` ${word}`
      res.write(chunk([{ index: 0, delta: { content }, finish_reason: null }]))
      stats.completionTokens++
    }
    res.write(chunk([{ index: 0, delta: {}, finish_reason: finish }]))
    res.write(chunk([], { usage }))
    res.end('data: [DONE]\n\n')
  })
  return Object.assign(server, { stats: () => ({ ...stats }) })
}

/** Why the body is not a chat completion request this model takes, or undefined when it is one. */
function checkRequest(body) {
  if (typeof body !== 'object' || body === null) return 'The body must be a JSON object.'
  const { messages, max_tokens: maxTokens, stream } = body
  if (
    !Array.isArray(messages) ||
    messages.length === 0 ||
    !messages.every((m) => typeof m?.role === 'string' && typeof m?.content === 'string')
  ) {
    return '`messages` must be a non-empty list of { role, content } with string contents.'
  }
  if (maxTokens !== undefined && !(Number.isInteger(maxTokens) && maxTokens >= 1)) {
    return '`max_tokens` must be an integer of at least 1.'
  }
  if (stream !== undefined && typeof stream !== 'boolean') return '`stream` must be true or false.'
  return undefined
}

/** An error body as the OpenAI API sends one. */
export function error(message, type, code = null) {
  return { error: { message, type, param: null, code } }
}

export function sendJson(res, status, body, headers = {}) {
  const json = JSON.stringify(body)
  res.writeHead(status, {
    ...headers,
    'Content-Type': 'application/json',
    'Content-Length': Buffer.byteLength(json),
  })
  res.end(json)
}

/** The request's JSON body, or undefined when it is not JSON or larger than 64 KiB. */
async function readJson(req) {
  let text = ''
  for await (const chunk of req) {
    text += chunk
    if (text.length > 65_536) return undefined
  }
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const server = createModelServer({ wordMs: Number(process.env.MODEL_WORD_MS ?? 20) })
  const shutdown = () => {
    server.close()
    server.closeAllConnections()
  }
  process.once('SIGINT', shutdown)
  process.once('SIGTERM', shutdown)
  server.listen(Number(process.env.PORT ?? 3011), () => {
    console.log(`fake model ${MODEL} on http://localhost:${server.address().port}`)
  })
}
