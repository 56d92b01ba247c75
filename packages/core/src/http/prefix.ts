/**
 * @module The prefix of a limit an adapter builds for one route or handler: the base prefix and a label
 * (`sluice:GET /pay`, `sluice:PayController.pay`), so each route counts on its own, and a digest where the
 * label would make an invalid prefix (characters a store key cannot carry, or too long).
 */
import { createHash } from 'node:crypto'
import { isValidPrefix } from '../options.ts'

/** `<prefix>:<label>` when that is a valid prefix (printable ASCII, no `"` `\` `{` `}`, at most 128), else a digest. */
export function labelledPrefix(prefix: string, label: string): string {
  const candidate = `${prefix}:${label}`
  if (isValidPrefix(candidate)) return candidate
  const digest = createHash('sha256').update(candidate).digest('base64url').slice(0, 22)
  const short = `${prefix}:#${digest}`
  return short.length <= 128 ? short : `#${digest}`
}
