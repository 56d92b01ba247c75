/**
 * The usage a model reports (`{ prompt_tokens, completion_tokens, total_tokens }`), read from its answer as
 * it passes through the gateway: a JSON body, or server-sent events cut anywhere.
 */

/**
 * Reads server-sent events as they pass, in pieces cut anywhere: `push(text)` takes the next piece and
 * answers the `usage` of the first event whose JSON data carries one, once, when that event ends in it.
 */
export function usageReader() {
  let buffer = ''
  // A line may end in CR LF cut between two pieces: a CR at a piece's end waits for the next piece.
  let cr = ''
  let found = false
  return {
    push(piece) {
      if (found) return undefined
      const text = cr + piece
      cr = text.endsWith('\r') ? '\r' : ''
      buffer += text.slice(0, text.length - cr.length).replace(/\r\n?/g, '\n')
      for (let end = buffer.indexOf('\n\n'); end !== -1; end = buffer.indexOf('\n\n')) {
        const usage = usageOf(eventData(buffer.slice(0, end)))
        buffer = buffer.slice(end + 2)
        if (usage !== undefined) {
          found = true
          buffer = ''
          return usage
        }
      }
      return undefined
    },
  }
}

/** An event's data: its `data:` lines, joined by newlines. */
function eventData(event) {
  return event
    .split('\n')
    .filter((line) => line.startsWith('data:'))
    .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
    .join('\n')
}

/** The `usage` of a JSON text (an event's data or a whole body), when it has one with a total. */
export function usageOf(text) {
  if (text === '' || text === '[DONE]') return undefined
  try {
    const usage = JSON.parse(text)?.usage
    return Number.isInteger(usage?.total_tokens) && usage.total_tokens >= 0 ? usage : undefined
  } catch {
    return undefined
  }
}
