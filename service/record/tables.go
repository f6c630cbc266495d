package record

import "time"

// SQLTable is a SQL table a WriteToSql sink of the server's jobs writes,
// as `weir tables` shows it.
type SQLTable struct {
	// Name is the table's name (the view's, for a staged table); Layout is
	// "table" or "staged"; Driver is "sqlite" or "postgres".
	Name, Layout, Driver string
	// DSN locates the database; the API does not serve it (it may hold a
	// password).
	DSN string
	// Jobs are the names of the jobs whose pipelines write the table.
	Jobs []string
	// Members are the tables behind a staged view: the principal, then
	// the staging tables oldest first. A plain table has itself.
	Members []SQLTableMember
	// View summarises a staged view's rule.
	View string
	// Merges are the most recent merges, newest first.
	Merges []SQLTableMerge
	// Error says why the database could not be read (the rest is what the
	// pipelines say).
	Error string
}

// SQLTableMember is one table behind a staged view.
type SQLTableMember struct {
	// Table is its name; Role is "principal", "staging" or "table".
	Table, Role string
	// Generation is the job generation that created a staging table.
	Generation int64
	// Rows is how many rows it holds (-1: not counted).
	Rows int64
	// Columns are its columns, "name type".
	Columns []string
}

// SQLTableMerge is one merge of a staged table.
type SQLTableMerge struct {
	// At is when it ran; Duration how long it took.
	At       time.Time
	Duration time.Duration
	// Rows is how many rows moved into the principal; Members says from
	// which staging tables ("table:rows", comma-separated).
	Rows    int64
	Members string
	// Principal is the table merged into (set on a merge's reply).
	Principal string
}

// DriverFiles is the PartitionRun.Driver of a file sink's partitions.
const DriverFiles = "files"

// PartitionRun is one partition of a job name's partition runs in one
// target table or file, as `weir partitions list` shows it.
type PartitionRun struct {
	// Partition is the partition; Status is "published", "staged" (a
	// staging table without a log entry: the run failed, or was cancelled,
	// before publishing), "shadow" (a shadow run's kept staging table) or
	// "running".
	Partition, Status string
	// Target is the table the partition is published to; Table is where
	// its rows are now (the target, or the staging table).
	Target, Table string
	// Driver is "sqlite" or "postgres", or DriverFiles for a file sink
	// (Target its path, Table a version directory); DSN locates the
	// database (not served by the API), or a file sink's publication
	// manifest.
	Driver, DSN string
	// JobID is the run; ManifestDigest the input it read.
	JobID, ManifestDigest string
	// OutputDigest, Rows, Replaced and PublishedAt are the publication
	// log's (published only).
	OutputDigest string
	Rows         int64
	Replaced     int64
	PublishedAt  string
}
