/**
 * @module The rule grammar of the page's form and tables: core's own (`parseRuleSpecs`, `formatRuleSpec`
 * from `@sluice/core`), so the page, the API, the `sluice` command and `rules: ['…']` read one grammar,
 * written once; and core's `quota` factory and `quotaPeriod`, so the form builds a quota with core's checks
 * and a card says when a quota's period ends by core's calendar. The build bundles this file for the browser (dist/page/grammar.js) and the handler serves
 * it as `assets/grammar.js`.
 */
export { formatRuleSpec, parseRuleSpec, parseRuleSpecs, quota, quotaPeriod } from '@sluice/core'
