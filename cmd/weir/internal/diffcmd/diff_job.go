package diffcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/weir-dev/weir/client"
	"github.com/weir-dev/weir/cmd/weir/internal/cli"
	"github.com/weir-dev/weir/cmd/weir/internal/serverconn"
	"github.com/weir-dev/weir/graph"
	"github.com/weir-dev/weir/io/files"
	"github.com/weir-dev/weir/row"
)

// job:NAME[/STEP] output specifiers of weir diff: the table a job's
// WriteToSql sink writes, or the files its file sink wrote, read from the
// job's record on the server (its graph's sink config or identity, its base
// directory, type, generation and partition), so a user compares a job's
// output without knowing where it lives.

// resolveJobSpec turns a job:NAME[/STEP] specifier into the output it
// names: the job's (NAME's current or latest job) WriteToSql or file sink
// step STEP, or its only one.
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
	filePaths := map[string]string{}
	var names []string
	for _, st := range g.Steps {
		if st.Kind == graph.KindSink && st.Sink != nil && strings.HasPrefix(st.Sink.Kind, "file_") && st.Sink.Identity != "" {
			filePaths[st.Name] = st.Sink.Identity
			names = append(names, st.Name)
			continue
		}
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
		return sp, cli.UsageErrorf("%s: job %s (%s) writes no WriteToSql table and no file; give its output as a file, sqlite:PATH#TABLE or postgres://...#TABLE", sp.raw, sp.job, j.ID)
	case step == "" && len(names) > 1:
		return sp, cli.UsageErrorf("%s: job %s writes %d outputs: name the sink step, job:%s/STEP (one of %s)", sp.raw, sp.job, len(names), sp.job, strings.Join(names, ", "))
	case step == "":
		step = names[0]
	}
	if path, ok := filePaths[step]; ok {
		out, err := jobFiles(sp.raw, path, j.Type == client.TypeStreaming, j.Generation, j.Partition, j.ID)
		out.key = SinkKey(g, step)
		return out, err
	}
	cfg, ok := sinks[step]
	if !ok {
		return sp, cli.UsageErrorf("%s: job %s has no WriteToSql or file sink step %q (its sinks: %s)", sp.raw, sp.job, step, strings.Join(names, ", "))
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

// jobFiles is the file output of a job's file sink at path: a partition
// run's version directory (or, once a rerun of a published manifest
// removed it, the partition's published version), a streaming job's
// committed part files of its generation, or a batch job's file.
func jobFiles(raw, path string, streaming bool, generation int64, partition, jobID string) (outputSpec, error) {
	format, ok := fileFormats[strings.ToLower(filepath.Ext(path))]
	if !ok {
		return outputSpec{}, cli.UsageErrorf("%s: the sink writes %s, whose format weir diff cannot tell from the extension", raw, path)
	}
	out := outputSpec{raw: raw, kind: specFile, format: format, path: path}
	switch {
	case partition != "":
		dir := files.VersionDir(path, partition, jobID)
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			out.path = dir
			return out, nil
		}
		out.kind, out.path, out.table = specPublished, files.ManifestPath(path), partition
	case streaming:
		out.path = files.GenerationGlob(path, generation)
	}
	return out, nil
}

// SinkKey is the key of the rows sink step writes, when the graph says it:
// the sink reads a keyed aggregation (a YAML Combine) directly, whose rows
// carry its group_by fields, and those are the key (the window comes with
// the rows' window fields). Nil when the graph does not say (the sink reads
// a step that may rename or drop fields, or a key that is not a row's
// fields).
func SinkKey(g *graph.Pipeline, step string) []string {
	st := g.Step(step)
	if st == nil || st.Kind != graph.KindSink {
		return nil
	}
	col := g.Collection(st.Inputs[graph.MainTag])
	if col == nil {
		return nil
	}
	prod := g.Step(col.Producer)
	if prod == nil || prod.Kind != graph.KindCombinePerKey || prod.KeyCoder == nil || prod.KeyCoder.URN != row.CoderURN || len(prod.KeyCoder.Fields) == 0 {
		return nil
	}
	key := make([]string, len(prod.KeyCoder.Fields))
	for i, f := range prod.KeyCoder.Fields {
		key[i] = f.Name
	}
	return key
}

// FileSinkKey is SinkKey of the file sink of g that writes path, or nil.
func FileSinkKey(g *graph.Pipeline, path string) []string {
	for _, st := range g.Steps {
		if st.Kind == graph.KindSink && st.Sink != nil && strings.HasPrefix(st.Sink.Kind, "file_") && st.Sink.Identity == path {
			return SinkKey(g, st.Name)
		}
	}
	return nil
}
