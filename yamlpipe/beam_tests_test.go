package yamlpipe

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/weir-dev/weir"
)

// beamTestPipeline is one pipeline of a Beam YAML test file.
type beamTestPipeline struct {
	line int    // 1-based line of its "- pipeline:" item
	src  string // a document of its own, on the lines it has in the file
}

var beamPipelineItem = regexp.MustCompile(`^(\s*)- pipeline:`)

// beamTestPipelines splits a Beam YAML test file (testdata/beam/tests; the
// layout Beam's yaml/integration_tests.py reads: `fixtures:`, then
// `pipelines:`, a list of `- pipeline: ...` items) into one document per
// pipeline. Each document keeps the pipeline's lines where they are in the
// file (earlier lines blank), so load errors name the file's line:column.
// {TEMP_DIR}, Beam's temporary-directory fixture, becomes dir.
func beamTestPipelines(src, dir string) []beamTestPipeline {
	lines := strings.Split(strings.ReplaceAll(src, "{TEMP_DIR}", dir), "\n")
	var starts []int
	for i, ln := range lines {
		if beamPipelineItem.MatchString(ln) {
			starts = append(starts, i)
		}
	}
	out := make([]beamTestPipeline, len(starts))
	for k, s := range starts {
		end := len(lines)
		if k+1 < len(starts) {
			end = starts[k+1]
		}
		doc := make([]string, end)
		copy(doc[s:], lines[s:end])
		m := beamPipelineItem.FindStringSubmatch(doc[s])
		doc[s] = m[1] + "  pipeline:" + doc[s][len(m[0]):]
		out[k] = beamTestPipeline{line: s + 1, src: strings.Join(doc, "\n")}
	}
	return out
}

// Beam's YAML test files (testdata/beam/tests, unmodified but for the
// license header) run as Beam runs them: every pipeline of a file in turn,
// each passing when its AssertEqual steps see exactly their elements.
// Pipelines that need what weir does not have (Java UDFs, SQL) must fail to
// load with the error given here, at their file:line:column.
func TestBeamYAMLTests(t *testing.T) {
	tests := []struct {
		file string
		// loadErr maps a pipeline's index to the load error it must get.
		loadErr map[int]string
		// runErr maps a pipeline's index to the run error it must get.
		runErr map[int]string
	}{
		{file: "reshuffle.yaml"},
		{file: "windowinto.yaml"},
		{file: "create.yaml"},
		{file: "explode.yaml"},
		{file: "assign_timestamps.yaml"},
		{file: "filter.yaml", loadErr: map[int]string{
			// Java UDFs need Beam's Java expansion service.
			2: `filter.yaml:66:23: language "java" is not supported`,
			3: `filter.yaml:87:23: language "java" is not supported`,
			// Beam fails each element at run time (a NameError, to the error
			// output); weir refuses the undefined name when loading.
			4: `filter.yaml:116:31: keep: python: name "Electronics" is not defined`,
			// It reads the errors pipeline 4 wrote, which weir refused to load.
			5: `filter.yaml:131:19: ReadFromJson without a schema infers it from the file at load time: file pattern`,
		}},
		{file: "flatten.yaml"},
		{file: "windowing.yaml"},
		{file: "join.yaml"},
		{file: "partition.yaml"},
		{file: "maptofields.yaml"},
		{file: "text.yaml"},
		// Beam compares str() of its Timestamp and PaneInfo objects; weir's
		// timestamps are floats of seconds in Python, its panes rows.
		{file: "extract_windowing_Info.yaml", runErr: map[int]string{0: "assert_equal", 1: "assert_equal", 2: "assert_equal"}},
		{file: "json.yaml"},
		{file: "avro.yaml"},
		// Failed until WriteToParquet wrote rank 0 as 0 rather than null.
		{file: "parquet.yaml"},
		{file: "tsv.yaml"},
		{file: "map.yaml"},
		{file: "match_all.yaml"},
		{file: "csv.yaml"},
		{file: "validate_with_schema.yaml"},
		// PyTransform runs Beam Python code (beam.Map, apache_beam.io); the
		// fourth pipeline, a WriteToCsv, runs.
		{file: "pytransform.yaml", loadErr: map[int]string{
			0: `pytransform.yaml:18:17: unknown transform type "PyTransform"`,
			1: `pytransform.yaml:45:17: unknown transform type "PyTransform"`,
			2: `pytransform.yaml:75:17: unknown transform type "PyTransform"`,
			4: `pytransform.yaml:110:17: unknown transform type "PyTransform"`,
			5: `pytransform.yaml:129:17: unknown transform type "PyTransform"`,
		}},
		// A hadoop catalog, partitioned by a boolean and a truncated
		// string, read back with a filter on a column it does not keep.
		{file: "iceberg.yaml"},
		{file: "tfrecord_write.yaml", loadErr: map[int]string{
			0: `tfrecord_write.yaml:23:17: unknown transform type "WriteToTFRecord"`,
		}},
		// A filter (run per element) and a GROUP BY (run per window), by
		// SQLite.
		{file: "sql.yaml"},
		{file: "java-map.yaml", loadErr: map[int]string{
			0: `java-map.yaml:16:23: language "java" is not supported`,
		}},
		// MLTransform (tensorflow_transform's ScaleTo01, ScaleByMinMax).
		{file: "ml_transform.yaml", loadErr: map[int]string{
			0: `ml_transform.yaml:18:17: unknown transform type "MLTransform"`,
			1: `ml_transform.yaml:58:17: unknown transform type "MLTransform"`,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join("testdata", "beam", "tests", tc.file)
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			pipelines := beamTestPipelines(string(src), dir)
			if len(pipelines) == 0 {
				t.Fatal("no pipelines in the file")
			}
			for i, bp := range pipelines {
				var log bytes.Buffer
				p, err := Load(path, []byte(bp.src), Options{BaseDir: dir, LogOutput: &log})
				if want, ok := tc.loadErr[i]; ok {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("pipeline %d (line %d): load error %v, want one containing %q", i, bp.line, err, want)
					}
					continue
				}
				if err != nil {
					t.Errorf("pipeline %d (line %d): %v", i, bp.line, err)
					continue
				}
				_, err = weir.Run(context.Background(), p, weir.RunOptions{NumWorkers: 2})
				if want, ok := tc.runErr[i]; ok {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("pipeline %d (line %d): run error %v, want one containing %q", i, bp.line, err, want)
					}
					continue
				}
				if err != nil {
					t.Errorf("pipeline %d (line %d): %v", i, bp.line, err)
				}
			}
		})
	}
}

func TestBeamTestPipelinesSplit(t *testing.T) {
	src := "fixtures:\n  - name: TEMP_DIR\npipelines:\n  - pipeline:\n      type: chain\n  - pipeline:\n      path: \"{TEMP_DIR}/x\"\n"
	got := beamTestPipelines(src, "/tmp/d")
	want := []beamTestPipeline{
		{line: 4, src: "\n\n\n    pipeline:\n      type: chain"},
		{line: 6, src: "\n\n\n\n\n    pipeline:\n      path: \"/tmp/d/x\"\n"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}
