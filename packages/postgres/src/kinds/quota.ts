/**
 * @module quota in PL/pgSQL: not yet. A placeholder so every kind has its entry: its steps do nothing, and
 * its params refuse the rule when a call brings it (`ERR_SLUICE_UNSUPPORTED`), before any SQL runs.
 */
import { ErrorCode, type QuotaRule, SluiceError } from '@sluice/core'
import type { KindSql } from './kind.ts'

export const quotaSql: KindSql<QuotaRule> = {
  code: 0,
  params: (rule) => {
    throw new SluiceError(
      ErrorCode.UNSUPPORTED,
      `The PostgreSQL store cannot apply quota rules yet (rule ${rule.name}).`,
    )
  },
  decide: '',
  admit: '',
  refund: '',
  refundCall: '',
  penalize: '',
}
