/**
 * sluice's decisions as metrics: OpenTelemetry and Prometheus sinks for core's diagnostics channels, and
 * live per-second statistics that every process can publish to Redis for the dashboard. Re-exports only.
 *
 * @module @sluice/metrics
 */
export { STATS_BOUNDS } from './bounds.ts'
export {
  type DeniedKey,
  type LimiterStats,
  type LiveStats,
  type LiveStatsOptions,
  type LiveStatsSnapshot,
  liveStats,
  type SecondCounts,
} from './live-stats.ts'
export { CHANNELS, type DecisionResult, resultOf } from './messages.ts'
export { type OpenTelemetryMeter, type OpenTelemetryMetricsOptions, openTelemetryMetrics } from './otel.ts'
export { type PrometheusMetricsOptions, type PrometheusRegistry, prometheusMetrics } from './prometheus.ts'
export {
  DEFAULT_STATS_PREFIX,
  type PublishedStats,
  type PublishStatsOptions,
  publishStats,
  type ReadPublishedStatsOptions,
  readPublishedStats,
  type StatsMeta,
  type StatsPublisher,
  type StatsRedisClient,
} from './publish.ts'
export type { MetricsSubscription } from './shared.ts'
