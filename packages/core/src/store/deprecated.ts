/**
 * @module Names `@sluice/core/store` offered that no store uses, kept one release with a warning once
 * (code `SLUICE_DEP_STORE_KIT`): the kit exports what a store needs and nothing else. Each says what to use
 * instead.
 */
import { blockLength as length, MAX_BLOCK_HISTORY as MAX_HISTORY } from '../block.ts'
import { deprecatedFunction, deprecatedObject } from '../deprecate.ts'
import {
  durationLabel as label,
  oneOfOption as oneOf,
  positiveOption as positive,
  storeOption as storeCheck,
  isValidPrefix as validPrefix,
} from '../options.ts'
import { algorithmOf as algorithm } from '../rules/index.ts'
import { RULE_KINDS as KINDS } from '../rules/spec.ts'

const CODE = 'SLUICE_DEP_STORE_KIT'

/** @deprecated A store keeps the block starts `BlockPolicy.keep` says. Removed next release. */
export const MAX_BLOCK_HISTORY: number = MAX_HISTORY

/** @deprecated Build rules with `ruleFromSpec` or `parseRuleSpec` (`@sluice/core`). Removed next release. */
export const RULE_KINDS = deprecatedObject(
  KINDS,
  CODE,
  'RULE_KINDS (@sluice/core/store)',
  "build rules with ruleFromSpec or parseRuleSpec from '@sluice/core'.",
)

/** @deprecated A store runs its own algorithms (the memory store's, or scripts). Removed next release. */
export const algorithmOf = deprecatedFunction(
  algorithm,
  CODE,
  'algorithmOf (@sluice/core/store)',
  'a store runs its own algorithms.',
)

/** @deprecated `blockedAnswer` and the store's own block arithmetic. Removed next release. */
export const blockLength = deprecatedFunction(
  length,
  CODE,
  'blockLength (@sluice/core/store)',
  "a store's block length is computed where it begins the block.",
)

/** @deprecated A rule's `name` carries its label. Removed next release. */
export const durationLabel = deprecatedFunction(
  label,
  CODE,
  'durationLabel (@sluice/core/store)',
  "a rule's name carries its label.",
)

/** @deprecated Use `prefixOption`, which throws a coded error. Removed next release. */
export const isValidPrefix = deprecatedFunction(
  validPrefix,
  CODE,
  'isValidPrefix (@sluice/core/store)',
  'use prefixOption, which throws a coded error.',
)

/** @deprecated Check the option with `readOptions` and your own comparison. Removed next release. */
export const oneOfOption = deprecatedFunction(
  oneOf,
  CODE,
  'oneOfOption (@sluice/core/store)',
  'compare the value yourself and throw an InvalidOptionError.',
)

/** @deprecated Use `integerOption`, or compare and throw an `InvalidOptionError`. Removed next release. */
export const positiveOption = deprecatedFunction(
  positive,
  CODE,
  'positiveOption (@sluice/core/store)',
  'use integerOption, or compare and throw an InvalidOptionError.',
)

/** @deprecated `createLimiter` checks its `store` option. Removed next release. */
export const storeOption = deprecatedFunction(
  storeCheck,
  CODE,
  'storeOption (@sluice/core/store)',
  'createLimiter checks its store option.',
)
