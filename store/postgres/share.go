package postgres

import (
	"github.com/taskdeck/taskdeck/model"
)

// Share tells an engine its fair share of the open tasks of servers:
// engines is how many engines are connected to this database (distinct
// application names that begin with prefix; a dead engine's connections
// end with it), open how many of those tasks have not ended.
func (s *Store) Share(prefix string, servers []string) (engines, open int, err error) {
	var statuses []string
	for _, st := range model.AllStatuses {
		if !st.Terminal() {
			statuses = append(statuses, string(st))
		}
	}
	ctx, cancel, err := s.ctx()
	if err != nil {
		return 0, 0, err
	}
	defer cancel()
	err = s.reread(func() error {
		return s.pool.QueryRow(ctx, `SELECT
			(SELECT count(DISTINCT application_name) FROM pg_stat_activity
				WHERE datname = current_database() AND starts_with(application_name, $1)),
			(SELECT count(*) FROM taskdeck_tasks WHERE status = ANY($2) AND server = ANY($3))`,
			prefix, statuses, servers).Scan(&engines, &open)
	})
	if err != nil {
		return 0, 0, dbError("count the fleet's engines", err)
	}
	return engines, open, nil
}
