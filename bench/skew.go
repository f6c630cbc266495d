package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/weir-dev/weir"
	"github.com/weir-dev/weir/yamlpipe"
)

// SkewConfig configures one run of `weir bench skew`: a bounded partition
// of Rows rows {key, amount} in a JSON lines file, read by ReadFromJson,
// summed per key by Combine and written by WriteToJson, as a batch
// migration's partition run reads its manifest's files. HotShare of the
// rows carry one key ("hot"); the rest spread evenly over Keys keys.
type SkewConfig struct {
	// Rows is the partition's size. Default 1,000,000.
	Rows int64
	// Keys is the number of keys the rows not on the hot key spread over.
	// Default 10,000.
	Keys int64
	// HotShare is the share of the rows on the hot key, in [0, 1). 0: an
	// even partition.
	HotShare float64
	// Workers is the job's worker count. Default 2.
	Workers int
	// Dir holds the input and output files.
	Dir string
}

// EnsureDefaults fills unset fields.
func (c *SkewConfig) EnsureDefaults() {
	if c.Rows == 0 {
		c.Rows = 1_000_000
	}
	if c.Keys == 0 {
		c.Keys = 10_000
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
}

// Validate reports a configuration that cannot run.
func (c SkewConfig) Validate() error {
	switch {
	case c.Rows < 1, c.Keys < 1, c.Workers < 1:
		return fmt.Errorf("skew benchmark: rows, keys and workers must be at least 1 (got %d, %d, %d)", c.Rows, c.Keys, c.Workers)
	case c.HotShare < 0 || c.HotShare >= 1:
		return fmt.Errorf("skew benchmark: the hot key's share %v is not in [0, 1)", c.HotShare)
	case c.Dir == "":
		return fmt.Errorf("skew benchmark: no directory for the files")
	}
	return nil
}

// SkewOutcome is what one run of the skew benchmark measured.
type SkewOutcome struct {
	Rows     int64   `json:"rows"`
	Keys     int64   `json:"keys"`
	HotShare float64 `json:"hot_share"`
	Workers  int     `json:"workers"`
	// HotRows is how many rows the hot key got.
	HotRows int64 `json:"hot_rows"`
	// ElapsedMillis is the time to load and run the pipeline (not to
	// write the input); RowsPerSec is Rows over it.
	ElapsedMillis float64 `json:"elapsed_ms"`
	RowsPerSec    float64 `json:"rows_per_sec"`
	// PeakHeapBytes is the largest live heap (HeapInuse) sampled every
	// 10 ms while the pipeline ran; InputBytes the input file's size.
	PeakHeapBytes int64 `json:"peak_heap_bytes"`
	InputBytes    int64 `json:"input_bytes"`
	// OutputKeys and OutputTotal are what the job wrote: one row per key
	// and the sum of the totals, checked against the generated input.
	OutputKeys  int64 `json:"output_keys"`
	OutputTotal int64 `json:"output_total"`
	GOMAXPROCS  int   `json:"gomaxprocs"`
}

// skewInput is the input file's name in SkewConfig.Dir.
const skewInput = "partition.jsonl"

// skewRow returns row i's key and amount: deterministic, the hot key for
// about HotShare of the rows (by a multiplicative hash of i, so hot rows
// are spread through the file, not bunched at its start).
func skewRow(cfg SkewConfig, i int64) (key string, amount int64) {
	h := uint64(i)*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	h ^= h >> 29
	amount = i%100 + 1
	if float64(h%10_000) < cfg.HotShare*10_000 {
		return "hot", amount
	}
	return "key-" + strconv.FormatInt(int64((h>>16)%uint64(cfg.Keys)), 10), amount
}

// writeSkewInput writes the partition's rows and returns the number on
// the hot key, the sum of the amounts and the distinct keys.
func writeSkewInput(cfg SkewConfig, path string) (hot, total int64, keys map[string]bool, err error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, 0, nil, fmt.Errorf("creating the input: %w", err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	keys = map[string]bool{}
	var line []byte
	for i := range cfg.Rows {
		k, a := skewRow(cfg, i)
		if k == "hot" {
			hot++
		}
		total += a
		keys[k] = true
		line = append(line[:0], `{"key":"`...)
		line = append(line, k...)
		line = append(line, `","amount":`...)
		line = strconv.AppendInt(line, a, 10)
		line = append(line, "}\n"...)
		if _, err := w.Write(line); err != nil {
			return 0, 0, nil, fmt.Errorf("writing the input: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return 0, 0, nil, fmt.Errorf("writing the input: %w", err)
	}
	return hot, total, keys, f.Close()
}

// skewYAML is the partition's pipeline.
const skewYAML = `# weir bench skew: one partition, summed per key.
pipeline:
  transforms:
    - type: ReadFromJson
      name: ReadPartition
      config:
        path: ` + skewInput + `
        schema: {key: string, amount: int}
    - type: Combine
      name: SumPerKey
      input: ReadPartition
      config:
        group_by: [key]
        combine:
          total: {value: amount, fn: sum}
          n: {value: amount, fn: count}
    - type: WriteToJson
      name: WriteSums
      input: SumPerKey
      config:
        path: sums.jsonl
`

// RunSkew writes the partition, runs the pipeline over it, and checks and
// measures what it wrote.
func RunSkew(ctx context.Context, cfg SkewConfig, logger *slog.Logger) (SkewOutcome, error) {
	cfg.EnsureDefaults()
	if err := cfg.Validate(); err != nil {
		return SkewOutcome{}, err
	}
	in := filepath.Join(cfg.Dir, skewInput)
	hot, total, keys, err := writeSkewInput(cfg, in)
	if err != nil {
		return SkewOutcome{}, err
	}
	st, err := os.Stat(in)
	if err != nil {
		return SkewOutcome{}, err
	}
	out := SkewOutcome{Rows: cfg.Rows, Keys: cfg.Keys, HotShare: cfg.HotShare, Workers: cfg.Workers, HotRows: hot,
		InputBytes: st.Size(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	runtime.GC()
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if v := int64(ms.HeapInuse); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	start := time.Now()
	p, err := yamlpipe.Load("skew.yaml", []byte(skewYAML), yamlpipe.Options{BaseDir: cfg.Dir})
	if err == nil {
		_, err = weir.Run(ctx, p, weir.RunOptions{NumWorkers: cfg.Workers, Logger: logger})
	}
	elapsed := time.Since(start)
	close(stop)
	<-sampled
	if err != nil {
		return SkewOutcome{}, fmt.Errorf("running the partition: %w", err)
	}
	out.ElapsedMillis = float64(elapsed.Microseconds()) / 1000
	out.RowsPerSec = float64(cfg.Rows) / elapsed.Seconds()
	out.PeakHeapBytes = peak.Load()
	if out.OutputKeys, out.OutputTotal, err = tallySkewOutput(filepath.Join(cfg.Dir, "sums.jsonl"), cfg.Rows); err != nil {
		return SkewOutcome{}, err
	}
	if out.OutputKeys != int64(len(keys)) || out.OutputTotal != total {
		return SkewOutcome{}, fmt.Errorf("%w: the job wrote %d keys summing to %d; the partition has %d keys summing to %d",
			ErrMismatch, out.OutputKeys, out.OutputTotal, len(keys), total)
	}
	return out, nil
}

// tallySkewOutput reads the job's sums: keys, the sum of the totals, and
// checks that the counts add up to rows.
func tallySkewOutput(path string, rows int64) (keys, total int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("opening the sums: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var n int64
	for line := 1; sc.Scan(); line++ {
		var r struct {
			Key   string `json:"key"`
			Total int64  `json:"total"`
			N     int64  `json:"n"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return 0, 0, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		keys++
		total += r.Total
		n += r.N
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if n != rows {
		return 0, 0, fmt.Errorf("%w: the sums count %d rows, the partition has %d", ErrMismatch, n, rows)
	}
	return keys, total, nil
}
