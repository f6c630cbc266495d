package diffcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
	"github.com/weir-dev/weir/graph"
)

// job:NAME[/STEP] output specifiers of weir diff: the table a job's
// WriteToSql sink writes, read from the job's record on the server (its
// graph's sink config and its base directory), so a user compares a job's
// output without knowing where it lives.

// resolveJobSpec turns a job:NAME[/STEP] specifier into the sink table it
// names: the job's (NAME's current or latest job) WriteToSql step STEP, or
// its only one.
func resolveJobSpec(ctx context.Context, server serverconn.Flag, sp outputSpec) (outputSpec, error) {
	c, err := serverconn.NewClient(server)
	if err != nil {
		return sp, err
	}
	j, err := c.Get(ctx, sp.job)
	if err != nil {
		return sp, serverconn.Error(ctx, c, fmt.Errorf("%s: finding job %s: %w", sp.raw, sp.job, err))
	}
	g, err := graph.Parse(j.Graph)
	if err != nil {
		return sp, cli.WithCode(cli.ExitRehearsalFailed, fmt.Errorf("%s: the graph of job %s: %w", sp.raw, j.ID, err))
	}
	type sqlSink struct {
		Driver string `json:"driver"`
		DSN    string `json:"dsn"`
		Table  string `json:"table"`
	}
	sinks := map[string]sqlSink{}
	var names []string
	for _, st := range g.Steps {
		if st.Kind != graph.KindSink || st.Sink == nil || st.Sink.Kind != "sql" || st.Fn == nil {
			continue
		}
		var cfg sqlSink
		if err := json.Unmarshal(st.Fn.Config, &cfg); err != nil || cfg.Table == "" {
			continue
		}
		sinks[st.Name] = cfg
		names = append(names, st.Name)
	}
	sort.Strings(names)
	step := sp.step
	switch {
	case len(names) == 0:
		return sp, cli.UsageErrorf("%s: job %s (%s) writes no WriteToSql table; give its output as a file, sqlite:PATH#TABLE or postgres://...#TABLE", sp.raw, sp.job, j.ID)
	case step == "" && len(names) > 1:
		return sp, cli.UsageErrorf("%s: job %s writes %d tables: name the sink step, job:%s/STEP (one of %s)", sp.raw, sp.job, len(names), sp.job, strings.Join(names, ", "))
	case step == "":
		step = names[0]
	}
	cfg, ok := sinks[step]
	if !ok {
		return sp, cli.UsageErrorf("%s: job %s has no WriteToSql step %q (its SQL sinks: %s)", sp.raw, sp.job, step, strings.Join(names, ", "))
	}
	out := outputSpec{raw: sp.raw, table: cfg.Table}
	switch strings.ToLower(cfg.Driver) {
	case "", "sqlite":
		path := strings.TrimPrefix(cfg.DSN, "file:")
		if i := strings.IndexByte(path, '?'); i >= 0 {
			path = path[:i]
		}
		if path == "" {
			return sp, cli.UsageErrorf("%s: step %s writes table %s to the server's default SQLite file, which clients are not told: give sqlite:PATH#%s", sp.raw, step, cfg.Table, cfg.Table)
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(j.BaseDir, path)
		}
		out.kind, out.path = specSQLite, path
	case "postgres", "postgresql":
		out.kind, out.dsn = specPostgres, cfg.DSN
	default:
		return sp, cli.UsageErrorf("%s: step %s writes with driver %q, which weir diff does not read", sp.raw, step, cfg.Driver)
	}
	return out, nil
}
