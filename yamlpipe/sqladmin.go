package yamlpipe

import (
	"time"

	"github.com/weir-dev/weir/io/sqlsink"
	"github.com/weir-dev/weir/runner/contract"
)

// SQLTableAdmin returns the administration of the SQL tables WriteToSql
// sinks write behind façade and staged views (the SQL sink's), for the job
// service's flows, with now as its clock (nil: time.Now).
func SQLTableAdmin(now func() time.Time) contract.SQLTableAdmin {
	return sqlsink.Admin{Now: now}
}
