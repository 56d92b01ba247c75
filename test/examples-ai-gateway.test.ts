/**
 * examples/ai-gateway as its users run it: the fake model (`node examples/ai-gateway/model.mjs`) and the
 * gateway (`node examples/ai-gateway/server.mjs`) as real processes on free ports, real HTTP requests, and
 * the exact budgets they promise (docs/token-budgets.md).
 */
import { afterAll, describe, expect, it } from 'vitest'
import { usageReader } from '../examples/ai-gateway/usage.mjs'
import { request, startServer, stopExamples } from './examples-harness.ts'

const MODEL = 'examples/ai-gateway/model.mjs'

afterAll(stopExamples)

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

  it('finds the usage however the stream is cut, once', () => {
    for (const text of [stream, stream.replaceAll('\n', '\r\n')]) {
      for (let size = 1; size <= text.length; size++) {
        const seen: unknown[] = []
        const reader = usageReader((u: unknown) => seen.push(u))
        for (let i = 0; i < text.length; i += size) reader.push(text.slice(i, i + size))
        reader.push(stream)
        expect(seen, `pieces of ${size}`).toEqual([usage])
      }
    }
  })

  it('finds none in a stream cut off before its usage', () => {
    const seen: unknown[] = []
    const reader = usageReader((u: unknown) => seen.push(u))
    reader.push(stream.slice(0, stream.indexOf('"usage"') + 20))
    expect(seen).toEqual([])
  })
})
