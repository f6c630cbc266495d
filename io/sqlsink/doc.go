// Package sqlsink implements WriteToSql: a sink that writes schema'd rows
// (package row) to a SQL table in SQLite (modernc.org/sqlite, embedded, the
// default) or PostgreSQL (github.com/jackc/pgx/v5), exactly once per
// checkpoint epoch.
//
// # Modes
//
// Upsert (the default when Config.Key is set) keeps one row per (key fields,
// window_start, window_end) and stores, besides the row's own fields, the
// pane (pane_index, pane_timing, pane_is_first, pane_is_last, pane_cut_short), the sink
// revision's generation, the job_id and updated_at. A write replaces the
// stored row only if its revision (generation, pane_index) is strictly newer:
// an older or equal revision is ignored, so replays and out-of-order panes
// never move a result backwards (the reference fixture in docs/ARCHITECTURE.md: an ON_TIME 425 then a LATE 475
// leaves 475, never 900, and replaying either leaves 475). The whole rule is
// one statement on both databases:
//
//	INSERT INTO t AS cur (...) ... ON CONFLICT (<key>) DO UPDATE SET ... WHERE <newer revision>
//
// A pane whose job did not see all of its window's input is cut short
// (window.PaneInfo.CutShort: a drain's last pane for a window still open,
// or a pane of a window that began before the job's input started); the
// nullable column pane_cut_short says so (null on rows written before the
// column existed: Prepare adds it to an older table, and such rows count as
// complete). The revision rule then orders generations by completeness
// first: within one generation the later pane wins; across generations a
// complete row replaces a cut-short one and is never replaced by one,
// whatever their generations, and otherwise the newer generation wins:
//
//	WHERE CASE WHEN excluded.generation = cur.generation
//	  THEN excluded.pane_index > cur.pane_index
//	  ELSE (<excluded complete>, excluded.generation) > (<cur complete>, cur.generation) END
//
// Upsert needs accumulating panes when a window can fire more than once:
// CheckAccumulation refuses the other strategies at submit time.
//
// Append (the default without a key) inserts every row once, identified by
// element_id (unique): a row whose element_id is already stored is ignored
// (ON CONFLICT DO NOTHING). Config.ElementID supplies the identity; the
// default is derived from the element's source position, window, pane and
// content (see DefaultElementID).
//
// # Rows the table cannot store
//
// A row with a null in a key or pane column (ReasonNullKey), a value of the
// wrong type (ReasonWrongType) or a value its column cannot hold
// (ReasonValueOutOfRange: a NUL character in PostgreSQL text, a NaN on
// SQLite, which would store null) fails Write. The runner calls
// WriteRejecting instead (contract.RejectingSink): such a row is left out and
// becomes a reject of the sink step — on its error output, in the dead-letter
// topic, or failing a bounded run — while the rest of the bundle is stored.
//
// # The global window
//
// Windowed results carry window_start and window_end, null for the global
// window (docs/ARCHITECTURE.md, "Contracts"). The columns keep those nulls (readers see exactly the
// records), and the upsert key is a unique expression index that maps null to
// a sentinel:
//
//	SQLite:     (k..., COALESCE(window_start, ''), COALESCE(window_end, ''))
//	PostgreSQL: (k..., COALESCE(window_start, '-infinity'::timestamptz),
//	                   COALESCE(window_end, 'infinity'::timestamptz))
//
// The index is named <table>_weir_key_<hash of the key>; Prepare refuses a
// table that already carries a weir key index for another key list.
//
// # Tables and columns
//
// Prepare creates the table on first use with columns typed from the row
// schema:
//
//	row type      SQLite              PostgreSQL
//	int           INTEGER             BIGINT
//	float         REAL                DOUBLE PRECISION
//	bool          INTEGER (0/1)       BOOLEAN
//	string        TEXT                TEXT
//	timestamp     TEXT (RFC 3339 UTC  TIMESTAMPTZ
//	              with milliseconds)
//	row/list/any  TEXT (JSON)         TEXT (JSON)
//
// The pane field of windowed records is flattened into the pane_* columns.
// If the table exists, Prepare compares its columns: a column whose type
// cannot hold the field is an error naming the table, the column, the
// existing and the wanted type (ErrColumnType); a missing value column is
// added; a missing key or bookkeeping column is an error. Validate performs
// the same checks without changing the database.
//
// # Lifecycle and exactly-once
//
// Sink implements contract.Sink and contract.TransactionalSink:
//
//   - New validates the configuration against the row schema; it does no I/O.
//   - Prepare (or Validate) is run by the caller at submit time, before any
//     data flows; it connects and creates or checks the table. Later calls
//     prepare lazily if the caller did not.
//   - Write is called with each bundle, concurrently across workers; it
//     converts and buffers the rows per worker and does no I/O (unless
//     Config.FlushEvery is set).
//   - PreCommit(worker, epoch) returns the worker's rows buffered since its
//     previous PreCommit, encoded (see the part format below); the runner stores
//     them in the checkpoint. If a part of an earlier epoch was never
//     committed (its Commit failed, or its checkpoint did not complete), its
//     rows are carried into the new part, so a later epoch's commit (after
//     which the sources acknowledge) or a restart from the later checkpoint
//     never leaves them out.
//   - Commit(epoch, parts) applies all parts of an epoch in one database
//     transaction together with the progress record
//     weir_sink_progress(sink_id, epoch). If the stored epoch is already >=
//     epoch, Commit changes nothing, so a replay after a crash is harmless.
//   - Close applies whatever is still buffered (the rows of a bounded run that
//     took no checkpoint, those written after the last barrier, and parts
//     pre-committed for a checkpoint that no Commit covered) in one final
//     transaction and disconnects. When the sink has seen checkpoints, that
//     final transaction is recorded as the epoch after the newest one seen.
//
// Rows are also idempotent by construction (revisions, element IDs), so a
// part applied twice, or a run replayed from its start, writes the same
// table.
//
// # Façade views
//
// In a parallel replacement two jobs of one name write one table at once.
// With Config.Facade the sink of generation G writes its own physical table
// <table>__g<G> (FacadeTableName) and keeps a view named <table> over every
// generation's table: per conflict key (key fields and window; element_id
// in append mode) the view returns the row of the newest generation that
// has one, else the older generation's (in upsert mode a complete row of
// any generation comes before a cut-short one, as in the revision rule, and
// the NOT EXISTS below also compares the two rows' revisions):
//
//	SELECT ... FROM t__g2 AS o
//	UNION ALL SELECT ... FROM t__g1 AS o WHERE NOT EXISTS
//	  (SELECT 1 FROM t__g2 AS n WHERE n.k = o.k AND COALESCE(n.window_start, ..) = ...)
//
// The generations are recorded in FacadeTable; every change to a façade
// (a generation's first Prepare, a migration, CompactFacade,
// DropFacadeGeneration) runs in one transaction holding the database's
// façade lock (SQLite's write lock, a PostgreSQL advisory lock) and
// rebuilds the view. The first façade Prepare of a plain table renames it to
// the physical table of the newest generation stored in it (no row moves).
// A sink without Facade whose table has become a façade view joins it as
// its own generation: at Prepare, or when a commit fails because the table
// became a view under it (that transaction changed nothing and is applied
// again to the generation's table). In façade mode the progress record is
// per generation (SinkID + "@g<G>"). EndFacadeGeneration records when a
// generation's job ended; CompactFacade merges the rows the view still
// serves from generations that ended a retention ago into the kept
// generation's table and drops theirs, in one transaction. On PostgreSQL a
// table or schema name over PostgresIdentifierLimit bytes, or a physical
// table name that would be, is refused by Config.Validate
// (ErrIdentifierTooLong). Every generation of a façade keys its rows alike.
// A generation whose rows rename a field (Config.RenamedColumns) records
// the rename in FacadeRenamesTable (facade_rename.go): the older
// generations' tables keep their columns, which the view, CompactFacade and
// FacadeGenerationRows read under the new name; DropFacadeGeneration
// forgets the dropped generation's renames.
// A generation set up with Config.FacadeHeld is registered but held back
// (FacadeHeldTable): the view serves the older generations alone until
// RevealFacadeGeneration rebuilds it over the held one, in one
// transaction; FacadeGenerationRows reads one generation's table for a
// comparison meanwhile (a parallel replacement gated on parity).
//
// # Staged layout
//
// With Config.Layout "staged" the sink writes a staging table
// <table>__staging_v<N> (StagingTableName), one per job generation (the
// newest one if this generation created it, else a new one: the older ones
// have ended); a principal table <table>__principal (PrincipalTableName)
// holds merged history; <table> is a view over both, built by the same
// code as a façade view (fxBuildView) over the staging tables newest first,
// then the principal: per key and window the newest revision wins, per
// element_id the newest member, and of two rows of equal revision the
// member listed first. The members are recorded in StagedMembersTable. A
// plain table of the name becomes the principal (renamed, rows kept).
//
// A merge (MergeStaged, Sink.Merge, and the sink itself after a commit
// once Config.MergeInterval has passed) runs in one façade transaction:
// for every staging table, its rows are upserted into the principal under
// the revision rule, then the staging rows the principal holds at the same
// or a newer revision are deleted (a newer pane written meanwhile stays),
// and an ended staging table left empty is dropped; the merge is recorded
// in StagedMergesTable. All of the current staging table's rows are merged,
// final or not: a later pane still wins through the view and the next
// merge. Interrupted, the transaction changes nothing; run twice, it moves
// nothing the second time. On PostgreSQL a merge or setup that changes
// columns or the view first locks the view (readers lock the view, then its
// tables, so the order cannot deadlock).
//
// A new value field is added to the staging table and the principal
// (nullable: older rows read null) and the view rebuilt. A declared rename
// (Config.RenamedColumns) is recorded in StagedRenamesTable at the sink's
// staging table: older staging tables keep their column and the view and
// the merges read it under the new name (staged_rename.go); the principal
// is renamed in place. An int column widened to float is served by the
// view beside the older members' ints and widened in the principal by the
// next merge; a float column narrowed to int is served truncated
// (servedAs) from the older members and the principal. An undeclared
// rename, another type change or a change of the key list is refused with
// ErrSchemaChange before anything changes. A staged sink
// cannot also be a façade generation.
//
// # Converting a column
//
// A value column whose type changes otherwise (Config.Convert declares
// it) is served by the view converted from the older members' types to
// the newest member's: an int, a float or a timestamp to a string
// (lossless), a string to an int or a float (lossy: null where the string
// is not a number) and a float to an int (lossy: truncated). The rules
// read only the members' declared types (convert.go), so a merge run by
// hand serves and moves rows as the sink's view does. A merge converts a
// PostgreSQL principal's column to a string in place; a lossy conversion
// leaves the principal's values as they are.
//
// # Re-keying a staged table
//
// A sink whose rows' key changed by a declared re-key (Config.Rekey: a
// Combine's migrations: rekey) moves, when its generation first sets up,
// the members written under the earlier keys aside and serves their rows
// under the new keys through two views and a map table, the rows of
// earlier keys that meet merged by the declared merges; the next merge
// folds them into a principal keyed anew, and until then a rollback
// (Config.UndoRekey) puts them back (staged_rekey.go, StagedRekeysTable).
// A plain table of the view's name that a staged sink adopts (its
// first setup) is re-keyed in the same transaction, as the principal of
// the earlier keys. A plain sink whose table holds rows, or a façade,
// refuses a re-key.
//
// # Part format
//
// A pre-committed part is self-describing: magic "wsq1", the generation and
// job ID of the writing sink, the column names, then the rows, each value a
// tag byte (null, int, float, false, true, string, timestamp) and its
// varint/fixed/length-prefixed payload. Timestamps keep their milliseconds and
// the ±∞ sentinels; nulls stay null.
//
// # Throughput
//
// SQLite runs in WAL mode with synchronous=FULL (an epoch's commit must
// survive a power loss, or a replay would be skipped), busy_timeout and
// BEGIN IMMEDIATE; a transaction executes prepared multi-row INSERTs
// (many rows per statement) on one connection.
// PostgreSQL copies each epoch into a temporary staging table (COPY) and
// upserts from it in one INSERT ... SELECT.
//
// # Dependencies
//
// The package may import row, runner/contract, window, mtime,
// internal/setdigest (a published partition's output digest),
// github.com/jackc/pgx/v5 and modernc.org/sqlite (the two database drivers)
// and the standard library. It must not import runner (the executor). It knows nothing of YAML or the job
// service: the WriteToSql transform builds a Config and a schema and hands
// the Sink to the runner.
package sqlsink
