/**
 * sluice's live dashboard: every process's decisions (allowed, queued, denied, shadow per second, and the
 * most denied keys) and every limit table in a browser, with a JSON API for scripts. Mount it in Express
 * or Fastify, or run it alone. Re-exports only.
 *
 * @module @sluice/dashboard
 */
export {
  DashboardError,
  type SkippedInstance,
  type StatsAnswer,
  type TableEntryView,
  type TableSummary,
  type TableView,
} from './api.ts'
export { type FastifyDashboardOptions, fastifyDashboard } from './fastify.ts'
export { CONTENT_SECURITY_POLICY, type DashboardHandler, dashboard, MAX_ENTRY_LENGTH } from './handler.ts'
export {
  type Access,
  type AccessPolicy,
  DashboardErrorCode,
  type DashboardOptions,
  type DashboardTable,
  type TableAuditRecord,
} from './options.ts'
export { MAX_RULES_PER_ENTRY } from './spec.ts'
export { type RunningDashboard, type StartDashboardOptions, startDashboard } from './standalone.ts'
export type { InstanceView, LimiterView, StatsView } from './stats.ts'
