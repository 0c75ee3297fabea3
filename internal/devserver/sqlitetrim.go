package devserver

import (
	"fmt"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	"go.temporal.io/server/common/resolver"
)

// idleVisibilityIndexes are the indexes of Temporal's SQLite visibility
// table on columns that transcriber's jobs never set, or that nothing lists
// by on one machine: parents and roots, schedules, batches, deployments, and
// the custom columns of types other than keyword. SQLite rewrites every
// index of the row on each visibility write, which a job makes on its start,
// on each state it enters and on its close; dropping these 43 of the 58
// halves the CPU of those writes and what they append to the log. A list
// that filters or sorts by one of these columns still answers, by reading
// the table. The list is explicit, so that an index a newer Temporal adds is
// kept.
var idleVisibilityIndexes = []string{
	"by_history_length", "by_history_size_bytes", "by_execution_duration", "by_state_transition_count",
	"by_task_queue", "by_parent_workflow_id", "by_parent_run_id", "by_root_workflow_id", "by_root_run_id",
	"by_batcher_user", "by_temporal_scheduled_start_time", "by_temporal_scheduled_by_id",
	"by_temporal_schedule_paused", "by_temporal_namespace_division", "by_temporal_pause_info",
	"by_temporal_worker_deployment_version", "by_temporal_workflow_versioning_behavior",
	"by_temporal_worker_deployment",
	"by_bool_01", "by_bool_02", "by_bool_03", "by_datetime_01", "by_datetime_02", "by_datetime_03",
	"by_double_01", "by_double_02", "by_double_03", "by_int_01", "by_int_02", "by_int_03",
	"by_temporal_bool_01", "by_temporal_bool_02", "by_temporal_datetime_01", "by_temporal_datetime_02",
	"by_temporal_double_01", "by_temporal_double_02", "by_temporal_int_01", "by_temporal_int_02",
	"by_temporal_keyword_01", "by_temporal_keyword_02", "by_temporal_keyword_03", "by_temporal_keyword_04",
	"by_temporal_low_cardinality_keyword_01",
}

// dropIdleVisibilityIndexes removes idleVisibilityIndexes from the SQLite
// database sqlConf names; those already gone are skipped, so it runs on
// every start and brings a database made by an earlier release along.
func dropIdleVisibilityIndexes(sqlConf *config.SQL) error {
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindVisibility, sqlConf, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("open %s: %w", sqlConf.DatabaseName, err)
	}
	defer func() { _ = db.Close() }()
	for _, name := range idleVisibilityIndexes {
		if err := db.Exec("DROP INDEX IF EXISTS " + name); err != nil {
			return fmt.Errorf("drop visibility index %s: %w", name, err)
		}
	}
	return nil
}
