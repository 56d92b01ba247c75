/**
 * examples/ai-gateway as its users run it: the fake model (`node examples/ai-gateway/model.mjs`) and the
 * gateway (`node examples/ai-gateway/server.mjs`) as real processes on free ports, real HTTP requests, and
 * the exact budgets they promise (docs/token-budgets.md).
 */
import { afterAll, describe, expect, it } from 'vitest'
import { usageReader } from '../examples/ai-gateway/usage.mjs'
import { freePort, type Reply, request, startServer, stopExamples } from './examples-harness.ts'
import { startRedis, stopAll } from './harness/redis.ts'

const MODEL = 'examples/ai-gateway/model.mjs'
const GATEWAY = 'examples/ai-gateway/server.mjs'

afterAll(async () => {
  await stopExamples()
  await stopAll()
})

const ask = (body: Record<string, unknown>, init: RequestInit = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(body),
  ...init,
})

const QUESTION = [{ role: 'user', content: 'What is a sluice?' }]

/** The answer the fake model always gives, 45 words. */
const ANSWER =
  'A sluice is a gate that holds water back and lets it through at a measured rate. ' +
  'Upstream the level may rise as it likes; downstream only what the gate allows ever arrives, ' +
  'so the mill below turns at the pace it was built for.'

/** A stream's events' data, in order. */
function events(text: string): string[] {
  return text
    .split('\n\n')
    .filter((e) => e !== '')
    .map((e) => {
      expect(e.startsWith('data: ')).toBe(true)
      return e.slice(6)
    })
}

describe('examples/ai-gateway, the fake model', () => {
  it('streams one word a chunk, then the finish reason, the usage and [DONE]', async () => {
    const model = await startServer(MODEL, { MODEL_WORD_MS: '1' })
    const url = `${model.url}/v1/chat/completions`
    const reply = await request(url, ask({ messages: QUESTION, max_tokens: 5, stream: true }))
    expect(reply.status).toBe(200)
    expect(reply.headers.get('content-type')).toBe('text/event-stream')
    const data = events(reply.text)
    expect(data.at(-1)).toBe('[DONE]')
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d))
    expect(chunks.map((c) => c.choices[0]?.delta.content)).toEqual([
      '',
      'A',
      ' sluice',
      ' is',
      ' a',
      ' gate',
      undefined,
      undefined,
    ])
    expect(chunks[6].choices).toEqual([{ index: 0, delta: {}, finish_reason: 'length' }])
    expect(chunks[7]).toEqual({
      id: 'chatcmpl-1',
      object: 'chat.completion.chunk',
      created: 0,
      model: 'sluice-fake-1',
      choices: [],
      usage: { prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 },
    })

    // Without stream: one completion, the whole answer (45 words, under its 512-token most).
    const whole = await request(url, ask({ messages: QUESTION }))
    expect(whole.body).toEqual({
      id: 'chatcmpl-2',
      object: 'chat.completion',
      created: 0,
      model: 'sluice-fake-1',
      choices: [{ index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' }],
      usage: { prompt_tokens: 4, completion_tokens: 45, total_tokens: 49 },
    })
    expect((await request(`${model.url}/v1/stats`)).body).toEqual({
      requests: 2,
      streams: 1,
      left: 0,
      promptTokens: 8,
      completionTokens: 50,
    })

    const bad = await request(url, ask({ messages: [], max_tokens: 0 }))
    expect(bad.status).toBe(400)
    expect(bad.body).toEqual({
      error: {
        message: '`messages` must be a non-empty list of { role, content } with string contents.',
        type: 'invalid_request_error',
        param: null,
        code: null,
      },
    })
  })
})

describe('examples/ai-gateway, reading the usage as it passes', () => {
  const usage = { prompt_tokens: 4, completion_tokens: 5, total_tokens: 9 }
  const stream =
    'data: {"choices":[{"delta":{"content":"A"}}]}\n\n' +
    `data: {"choices":[],"usage":${JSON.stringify(usage)}}\n\n` +
    'data: [DONE]\n\n'

  it('finds the usage however the stream is cut, once, in the piece that ends its event', () => {
    const end = stream.indexOf('\n\ndata: [DONE]') + 2
    for (const [text, ends] of [
      [stream, end],
      [stream.replaceAll('\n', '\r\n'), stream.slice(0, end).replaceAll('\n', '\r\n').length],
    ] as const) {
      for (let size = 1; size <= text.length; size++) {
        const seen: [number, unknown][] = []
        const reader = usageReader()
        for (let i = 0; i < text.length; i += size) {
          const found = reader.push(text.slice(i, i + size))
          if (found !== undefined) seen.push([i, found])
        }
        expect(reader.push(stream), `pieces of ${size}`).toBe(undefined)
        // Found in the piece holding the event's last character (its blank line's end, CR LF whole).
        expect(seen, `pieces of ${size}`).toEqual([[Math.floor((ends - 1) / size) * size, usage]])
      }
    }
  })

  it('finds none in a stream cut off before its usage', () => {
    const reader = usageReader()
    expect(reader.push(stream.slice(0, stream.indexOf('"usage"') + 20))).toBe(undefined)
  })
})

/**
 * Resolves at once when this minute has 15 s or more to run, else at the start of the next: the requests
 * rule is a fixed window on the clock's minutes, and a test's calls must all count in one of them (hence
 * the gateway tests' 40 s timeout).
 */
async function notNearAMinuteEdge(): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 15_000) await new Promise((resolve) => setTimeout(resolve, left + 20))
}

/** The fake model and a gateway in front of it, each a process of its own on a free port. */
async function start(wordMs: number): Promise<{ model: string; gateway: string }> {
  const model = await startServer(MODEL, { MODEL_WORD_MS: String(wordMs) })
  const gateway = await startServer(GATEWAY, { MODEL_URL: model.url })
  await notNearAMinuteEdge()
  return { model: model.url, gateway: `${gateway.url}/v1/chat/completions` }
}

/** A chat completion request from the key `key`. */
const call = (key: string, body: Record<string, unknown>, init: RequestInit = {}): RequestInit =>
  ask(body, { headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, ...init })

/** A prompt of `n` words. */
const words = (n: number) => [{ role: 'user', content: Array.from({ length: n }, () => 'water').join(' ') }]

/** OpenAI's rate-limit fields of a reply, every other header left out. */
function openai(reply: Reply): Record<string, string> {
  return Object.fromEntries([...reply.headers].filter(([name]) => name.startsWith('x-ratelimit-')))
}

/** OpenAI's reset duration (`"59.5s"`, `"1m0s"`, `"120ms"`) in ms. */
function durationMs(text: string): number {
  const match = /^(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s|(\d+)ms)$/.exec(text)
  expect(match, text).not.toBe(null)
  return Number(match![1] ?? 0) * 60_000 + Number(match![2] ?? 0) * 1000 + Number(match![3] ?? 0)
}

/** What the gateway's headers say of both budgets, the resets left out (they follow the clock). */
function budgets(reply: Reply) {
  const h = openai(reply)
  expect(Object.keys(h).sort()).toEqual([
    'x-ratelimit-limit-requests',
    'x-ratelimit-limit-tokens',
    'x-ratelimit-remaining-requests',
    'x-ratelimit-remaining-tokens',
    'x-ratelimit-reset-requests',
    'x-ratelimit-reset-tokens',
  ])
  // Both windows are a minute long: a reset is within it.
  for (const name of ['x-ratelimit-reset-requests', 'x-ratelimit-reset-tokens']) {
    expect(durationMs(h[name]!)).toBeGreaterThan(0)
    expect(durationMs(h[name]!)).toBeLessThanOrEqual(60_000)
  }
  return {
    requests: `${h['x-ratelimit-remaining-requests']}/${h['x-ratelimit-limit-requests']}`,
    tokens: `${h['x-ratelimit-remaining-tokens']}/${h['x-ratelimit-limit-tokens']}`,
  }
}

/**
 * Checks a denial's `Retry-After`: the seconds until the 6-second bucket of the tokens rule counted between
 * the times `counted` leaves the minute, seen from the denial between the times `denied` (the servers read
 * the same clock as this test), and the same as `x-ratelimit-reset-tokens`. Returns it.
 */
function expectRetryAfter(reply: Reply, counted: [number, number], denied: [number, number]): number {
  const bucket = (t: number) => t - (t % 6000)
  const retryAfter = Number(reply.headers.get('retry-after'))
  expect(retryAfter).toBeGreaterThanOrEqual(Math.ceil((bucket(counted[0]) + 60_000 - denied[1]) / 1000))
  expect(retryAfter).toBeLessThanOrEqual(Math.ceil((bucket(counted[1]) + 60_000 - denied[0]) / 1000))
  expect(Math.ceil(durationMs(reply.headers.get('x-ratelimit-reset-tokens')!) / 1000)).toBe(retryAfter)
  return retryAfter
}

describe('examples/ai-gateway, the gateway', { timeout: 40_000 }, () => {
  it('reserves the most a call can use, passes the stream through, and settles to the usage in it', async () => {
    const { model, gateway } = await start(1)

    // 4 prompt tokens + max_tokens 100 reserved; no IETF fields, only OpenAI's.
    const streamed = await request(
      gateway,
      call('sk-a', { messages: QUESTION, max_tokens: 100, stream: true }),
    )
    expect(streamed.status).toBe(200)
    expect(streamed.headers.get('content-type')).toBe('text/event-stream')
    expect(streamed.headers.get('ratelimit')).toBe(null)
    expect(budgets(streamed)).toEqual({ requests: '9/10', tokens: '1896/2000' })
    // The model's events, as it sent them: the whole answer (45 words), then the usage and [DONE].
    const data = events(streamed.text)
    expect(data.at(-1)).toBe('[DONE]')
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d))
    expect(chunks.map((c) => c.choices[0]?.delta.content ?? '').join('')).toBe(ANSWER)
    expect(chunks.at(-1).usage).toEqual({ prompt_tokens: 4, completion_tokens: 45, total_tokens: 49 })

    // The settle gave back 104 − 49 = 55 tokens: the next call finds 2000 − 49, and reserves its own 104.
    const whole = await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 100 }))
    expect(whole.status).toBe(200)
    expect(whole.headers.get('content-type')).toMatch(/^application\/json/)
    expect(budgets(whole)).toEqual({ requests: '8/10', tokens: '1847/2000' })
    expect(whole.body.usage).toEqual({ prompt_tokens: 4, completion_tokens: 45, total_tokens: 49 })

    // Without max_tokens: the model's most, 512, is reserved (2000 − 49 − 49 − 4 − 512) and sent to it,
    // which cuts a 45-word answer nowhere.
    const capped = await request(gateway, call('sk-a', { messages: QUESTION }))
    expect(budgets(capped)).toEqual({ requests: '7/10', tokens: '1386/2000' })
    expect(capped.body.choices).toEqual([
      { index: 0, message: { role: 'assistant', content: ANSWER }, finish_reason: 'stop' },
    ])
    // A cap under the answer's length: 10 words written, 14 tokens charged (2000 − 3 × 49 − 14 − 104).
    const short = await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 10 }))
    expect(short.body.usage).toEqual({ prompt_tokens: 4, completion_tokens: 10, total_tokens: 14 })
    expect(budgets(await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 100 })))).toEqual({
      requests: '5/10',
      tokens: '1735/2000',
    })

    // Another key has budgets of its own.
    const other = await request(gateway, call('sk-b', { messages: QUESTION, max_tokens: 100 }))
    expect(budgets(other)).toEqual({ requests: '9/10', tokens: '1896/2000' })
    expect((await request(`${model}/v1/stats`)).body).toMatchObject({ requests: 6, streams: 1, left: 0 })
  })

  it('answers 429 with Retry-After when a key is out of tokens, and takes no request for it', async () => {
    const { gateway } = await start(1)
    // 1400 prompt tokens + 100: 1500 reserved, 1445 charged.
    const before = Date.now()
    const first = await request(gateway, call('sk-a', { messages: words(1400), max_tokens: 100 }))
    const counted = Date.now()
    expect(budgets(first)).toEqual({ requests: '9/10', tokens: '500/2000' })
    expect(first.body.usage).toEqual({ prompt_tokens: 1400, completion_tokens: 45, total_tokens: 1445 })

    // 500 + 100 more would make 2045.
    const asked = Date.now()
    const refused = await request(gateway, call('sk-a', { messages: words(500), max_tokens: 100 }))
    const answered = Date.now()
    expect(refused.status).toBe(429)
    expect(budgets(refused)).toEqual({ requests: '9/10', tokens: '555/2000' })
    // The tokens come back when the 6-second bucket the first call was counted in leaves the minute.
    const retryAfter = expectRetryAfter(refused, [before, counted], [asked, answered])
    expect(refused.body).toEqual({
      error: {
        message: `Rate limit reached for tokens per min: limit 2000, remaining 555. Please try again in ${retryAfter}s.`,
        type: 'tokens',
        param: null,
        code: 'rate_limit_exceeded',
      },
    })

    // A smaller call still fits: 4 + 100 of the 555.
    const small = await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 100 }))
    expect(budgets(small)).toEqual({ requests: '8/10', tokens: '451/2000' })
  })

  it('refuses, before counting, a call with no key, a bad body, or more tokens than a minute holds', async () => {
    const { model, gateway } = await start(1)
    const noKey = await request(gateway, ask({ messages: QUESTION }))
    expect(noKey.status).toBe(401)
    expect(noKey.body).toEqual({
      error: {
        message: 'Send your API key as `Authorization: Bearer <key>`.',
        type: 'invalid_request_error',
        param: null,
        code: 'invalid_api_key',
      },
    })
    const tooMany = await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 513 }))
    expect(tooMany.status).toBe(400)
    expect(tooMany.body.error).toMatchObject({ message: '`max_tokens` must be an integer from 1 to 512.' })
    const tooLarge = await request(gateway, call('sk-a', { messages: words(1500), max_tokens: 501 }))
    expect(tooLarge.status).toBe(400)
    expect(tooLarge.body.error).toEqual({
      message: 'This call may use 2001 tokens, more than the 2000 a minute your key has.',
      type: 'invalid_request_error',
      param: null,
      code: 'request_too_large',
    })
    const notJson = await request(gateway, call('sk-a', {}, { body: '{"messages": [' }))
    expect(notJson.status).toBe(400)
    expect(notJson.body.error).toMatchObject({ message: 'The body must be JSON.' })
    for (const r of [noKey, tooMany, tooLarge, notJson]) expect(openai(r)).toEqual({})
    expect((await request(`${model}/v1/stats`)).body).toMatchObject({ requests: 0 })
    expect(budgets(await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 100 })))).toEqual({
      requests: '9/10',
      tokens: '1896/2000',
    })
  })

  it('starts the fake model itself without MODEL_URL', async () => {
    const gateway = await startServer(GATEWAY)
    expect(gateway.output()).toMatch(/model at http:\/\/127\.0\.0\.1:\d+, budgets in memory/)
    await notNearAMinuteEdge()
    const url = `${gateway.url}/v1/chat/completions`
    const reply = await request(url, call('sk-a', { messages: QUESTION, max_tokens: 3 }))
    expect(budgets(reply)).toEqual({ requests: '9/10', tokens: '1993/2000' })
    expect(reply.body.choices).toEqual([
      { index: 0, message: { role: 'assistant', content: 'A sluice is' }, finish_reason: 'length' },
    ])
    // 7 reserved, 7 used.
    const next = await request(url, call('sk-a', { messages: QUESTION, max_tokens: 3 }))
    expect(budgets(next)).toEqual({ requests: '8/10', tokens: '1986/2000' })
  })

  it('charges no tokens for a call the model refused or never answered', async () => {
    const { model, gateway } = await start(1)
    // The model refuses what the gateway does not check (stream must be a boolean): its 400 is passed on.
    const refused = await request(
      gateway,
      call('sk-a', { messages: QUESTION, max_tokens: 100, stream: 'yes' }),
    )
    expect(refused.status).toBe(400)
    expect(refused.body.error).toEqual({
      message: '`stream` must be true or false.',
      type: 'invalid_request_error',
      param: null,
      code: null,
    })
    expect(budgets(refused)).toEqual({ requests: '9/10', tokens: '1896/2000' })
    // Settled at 0: the next call finds every token (and reserves its own 104), and one request fewer.
    const next = await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 100 }))
    expect(budgets(next)).toEqual({ requests: '8/10', tokens: '1896/2000' })
    expect((await request(`${model}/v1/stats`)).body).toMatchObject({ requests: 1 })

    // A gateway whose model is not there: 502, and the tokens go back as well.
    const away = await startServer(GATEWAY, { MODEL_URL: `http://127.0.0.1:${await freePort()}` })
    const url = `${away.url}/v1/chat/completions`
    await notNearAMinuteEdge()
    const unreached = await request(url, call('sk-a', { messages: QUESTION, max_tokens: 100 }))
    expect(unreached.status).toBe(502)
    expect(unreached.body.error).toEqual({
      message: 'The model could not be reached.',
      type: 'server_error',
      param: null,
      code: null,
    })
    expect(budgets(unreached)).toEqual({ requests: '9/10', tokens: '1896/2000' })
    const again = await request(url, call('sk-a', { messages: QUESTION, max_tokens: 100 }))
    expect(budgets(again)).toEqual({ requests: '8/10', tokens: '1896/2000' })
  })

  it('stops the model when the client leaves mid-stream; no usage arrives, so the reservation stands', async () => {
    const { model, gateway } = await start(50)
    const leaving = new AbortController()
    const res = await fetch(
      gateway,
      call(
        'sk-a',
        { messages: QUESTION, max_tokens: 100, stream: true },
        {
          signal: leaving.signal,
        },
      ),
    )
    expect(res.headers.get('x-ratelimit-remaining-tokens')).toBe('1896')
    // Read until three words have come, then leave.
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let text = ''
    while ((text.match(/"content":"[^"]+"/g) ?? []).length < 3) {
      const { value } = await reader.read()
      text += decoder.decode(value, { stream: true })
    }
    leaving.abort()

    // The model sees its client (the gateway) leave, and writes no more.
    let stats: Record<string, unknown> = {}
    for (let i = 0; i < 200 && stats.left !== 1; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      stats = (await request(`${model}/v1/stats`)).body
    }
    expect(stats).toMatchObject({ requests: 1, streams: 1, left: 1 })
    const sent = stats.completionTokens as number
    expect(sent).toBeGreaterThanOrEqual(3)
    expect(sent).toBeLessThan(45)
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect((await request(`${model}/v1/stats`)).body).toMatchObject({ completionTokens: sent })

    // The 104 tokens reserved stay charged: the next call finds 2000 − 104, and reserves its own 104.
    const next = await request(gateway, call('sk-a', { messages: QUESTION, max_tokens: 100 }))
    expect(budgets(next)).toEqual({ requests: '8/10', tokens: '1792/2000' })
  })
})

describe('examples/ai-gateway on Redis (REDIS_URL)', { timeout: 40_000 }, () => {
  it('gives two gateways on one Redis one budget per key, settles included', async () => {
    const redis = await startRedis()
    const model = await startServer(MODEL, { MODEL_WORD_MS: '1' })
    const env = { MODEL_URL: model.url, REDIS_URL: `redis://${redis.host}:${redis.port}` }
    const [one, two] = await Promise.all([startServer(GATEWAY, env), startServer(GATEWAY, env)])
    await notNearAMinuteEdge()
    const [first, second] = [one, two].map((g) => `${g.url}/v1/chat/completions`) as [string, string]

    // Streamed through the first: 104 reserved, settled to 49.
    const streamed = await request(first, call('sk-a', { messages: QUESTION, max_tokens: 100, stream: true }))
    expect(budgets(streamed)).toEqual({ requests: '9/10', tokens: '1896/2000' })
    expect(events(streamed.text).at(-1)).toBe('[DONE]')
    // The second sees what the first's settle gave back: 2000 − 49 − 104.
    const whole = await request(second, call('sk-a', { messages: QUESTION, max_tokens: 100 }))
    expect(budgets(whole)).toEqual({ requests: '8/10', tokens: '1847/2000' })
    // 1500 reserved on the first (2000 − 98 − 1500), settled to 1445: 457 left, which 600 more exceed.
    const before = Date.now()
    const large = await request(first, call('sk-a', { messages: words(1400), max_tokens: 100 }))
    const counted = Date.now()
    expect(budgets(large)).toEqual({ requests: '7/10', tokens: '402/2000' })
    const asked = Date.now()
    const refused = await request(second, call('sk-a', { messages: words(500), max_tokens: 100 }))
    const answered = Date.now()
    expect(refused.status).toBe(429)
    expect(budgets(refused)).toEqual({ requests: '7/10', tokens: '457/2000' })
    // 143 tokens must leave the minute, more than the 98 before the large call: its bucket must.
    expectRetryAfter(refused, [before, counted], [asked, answered])
    expect(refused.body.error).toMatchObject({ type: 'tokens', code: 'rate_limit_exceeded' })
  })
})
