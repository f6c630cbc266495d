package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// Environment variables that turn the test binary into a benchmark child
// (the harness tests re-execute it, as `weir bench` re-executes weir).
const (
	childVariantEnv = "WEIR_BENCH_TEST_CHILD_VARIANT"
	childEventsEnv  = "WEIR_BENCH_TEST_CHILD_EVENTS"
	childKeysEnv    = "WEIR_BENCH_TEST_CHILD_KEYS"
	childCorruptEnv = "WEIR_BENCH_TEST_CHILD_CORRUPT"
)

func TestMain(m *testing.M) {
	if name := os.Getenv(childVariantEnv); name != "" {
		os.Exit(testChild(name))
	}
	os.Exit(m.Run())
}

// testChild is the body of a child process started by the harness tests.
func testChild(name string) int {
	v, err := ParseVariant(name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	events, _ := strconv.ParseInt(os.Getenv(childEventsEnv), 10, 64)
	keys, _ := strconv.ParseInt(os.Getenv(childKeysEnv), 10, 64)
	cfg := Config{Events: events, Keys: keys}
	o, err := Run(context.Background(), v, cfg, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if os.Getenv(childCorruptEnv) == name {
		o.Total++
	}
	if err := json.NewEncoder(os.Stdout).Encode(o); err != nil {
		return 1
	}
	return 0
}

func TestParseVariant(t *testing.T) {
	tests := []struct {
		name    string
		want    Variant
		wantErr bool
	}{
		{name: "baseline", want: Variant{Kind: KindBaseline, Workers: 1}},
		{name: "sdk-w1", want: Variant{Kind: KindSDK, Workers: 1}},
		{name: "sdk-w2", want: Variant{Kind: KindSDK, Workers: 2}},
		{name: "yaml-w1", want: Variant{Kind: KindYAML, Workers: 1}},
		{name: "yaml-w16", want: Variant{Kind: KindYAML, Workers: 16}},
		{name: "sdk-w0", wantErr: true},
		{name: "sdk", wantErr: true},
		{name: "sdk-wx", wantErr: true},
		{name: "java-w1", wantErr: true},
		{name: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVariant(tt.name)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseVariant(%q) error = %v, want error %v", tt.name, err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if got != tt.want {
				t.Errorf("ParseVariant(%q) = %+v, want %+v", tt.name, got, tt.want)
			}
			if got.String() != tt.name {
				t.Errorf("%+v.String() = %q, want %q", got, got.String(), tt.name)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg     Config
		wantErr bool
	}{
		{cfg: Config{Events: 1, Keys: 1}},
		{cfg: Config{Events: DefaultEvents, Keys: DefaultKeys}},
		{cfg: Config{Events: 0, Keys: 1}, wantErr: true},
		{cfg: Config{Events: 1, Keys: 0}, wantErr: true},
		{cfg: Config{Events: -5, Keys: 3}, wantErr: true},
		{cfg: Config{Events: 1 << 41, Keys: 3}, wantErr: true},
	}
	for _, tt := range tests {
		if err := tt.cfg.Validate(); (err != nil) != tt.wantErr {
			t.Errorf("%+v.Validate() = %v, want error %v", tt.cfg, err, tt.wantErr)
		}
	}
}

// wantResults returns the number of (window, key) sums cfg produces.
func wantResults(cfg Config) int64 {
	seen := map[[2]int64]bool{}
	for i := int64(0); i < cfg.Events; i++ {
		k, _ := Event(i, cfg.Keys)
		seen[[2]int64{int64(EventTime(i)-Start) / int64(WindowSize), k}] = true
	}
	return int64(len(seen))
}

// TestVariantsAgree runs every variant in this process on workloads that
// cross window boundaries (and leave a partial last window) and checks each
// against the generated total and against the baseline.
func TestVariantsAgree(t *testing.T) {
	cfgs := []Config{
		{Events: 1, Keys: 1},
		{Events: 1000, Keys: 7},
		{Events: 650_001, Keys: 13},
	}
	if testing.Short() {
		cfgs = cfgs[:2]
	}
	variants := []Variant{
		{Kind: KindBaseline, Workers: 1},
		{Kind: KindSDK, Workers: 1},
		{Kind: KindSDK, Workers: 2},
		{Kind: KindSDK, Workers: 3},
		{Kind: KindYAML, Workers: 1},
		{Kind: KindYAML, Workers: 2},
	}
	for _, cfg := range cfgs {
		total := ExpectedTotal(cfg)
		results := wantResults(cfg)
		base := RunBaseline(cfg)
		for _, v := range variants {
			t.Run(fmt.Sprintf("%s/events=%d/keys=%d", v, cfg.Events, cfg.Keys), func(t *testing.T) {
				o, err := Run(context.Background(), v, cfg, nil)
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
				if err := o.Check(cfg, total); err != nil {
					t.Fatal(err)
				}
				if o.Variant != v.String() || o.Results != results || o.Checksum != base.Checksum {
					t.Errorf("got variant %s, %d results, checksum %x; want %s, %d results, checksum %x (baseline)",
						o.Variant, o.Results, o.Checksum, v, results, base.Checksum)
				}
			})
		}
	}
}

func TestOutcomeCheck(t *testing.T) {
	cfg := Config{Events: 10, Keys: 2}
	total := ExpectedTotal(cfg)
	tests := []struct {
		name string
		o    Outcome
		ok   bool
	}{
		{name: "right", o: Outcome{Events: 10, Results: 2, Total: total}, ok: true},
		{name: "wrong total", o: Outcome{Events: 10, Results: 2, Total: total - 1}},
		{name: "wrong events", o: Outcome{Events: 9, Results: 2, Total: total}},
		{name: "no results", o: Outcome{Events: 10, Total: total}},
	}
	for _, tt := range tests {
		err := tt.o.Check(cfg, total)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, ErrMismatch)) {
			t.Errorf("%s: Check = %v, want ok %v (or ErrMismatch)", tt.name, err, tt.ok)
		}
	}
}

func testHarness(t *testing.T, corrupt string) Harness {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Harness{
		Command: func(ctx context.Context, v Variant, cfg Config) *exec.Cmd {
			cmd := exec.CommandContext(ctx, exe)
			cmd.Env = append(os.Environ(),
				childVariantEnv+"="+v.String(),
				childEventsEnv+"="+strconv.FormatInt(cfg.Events, 10),
				childKeysEnv+"="+strconv.FormatInt(cfg.Keys, 10),
				childCorruptEnv+"="+corrupt,
			)
			return cmd
		},
	}
}

func TestHarness(t *testing.T) {
	cfg := Config{Events: 20_000, Keys: 10}
	variants := Variants([]int{1, 2})
	ms, err := testHarness(t, "").Run(context.Background(), cfg, variants)
	if err != nil {
		t.Fatalf("Harness.Run: %v", err)
	}
	if len(ms) != len(variants) {
		t.Fatalf("got %d measurements, want %d", len(ms), len(variants))
	}
	for i, m := range ms {
		if m.Name != variants[i].String() {
			t.Errorf("measurement %d is %q, want %q", i, m.Name, variants[i])
		}
		if m.EventsPerSec <= 0 || m.CPUSeconds <= 0 || m.PeakRSSBytes <= 0 || m.RatioToBaseline <= 0 {
			t.Errorf("%s: missing figures: %+v", m.Name, m)
		}
	}
	if ms[0].RatioToBaseline != 1 {
		t.Errorf("baseline ratio = %v, want 1", ms[0].RatioToBaseline)
	}
	if got := len(Targets(ms)); got != 3 {
		t.Errorf("got %d targets, want 3", got)
	}
}

// TestHarnessDetectsWrongResult makes one child lie about its total: the
// harness must refuse to report figures.
func TestHarnessDetectsWrongResult(t *testing.T) {
	for _, corrupt := range []string{"baseline", "sdk-w1"} {
		t.Run(corrupt, func(t *testing.T) {
			_, err := testHarness(t, corrupt).Run(context.Background(), Config{Events: 5000, Keys: 3}, Variants([]int{1}))
			if !errors.Is(err, ErrMismatch) {
				t.Fatalf("Harness.Run = %v, want ErrMismatch", err)
			}
		})
	}
}

func TestTargets(t *testing.T) {
	tests := []struct {
		name string
		ms   []Measurement
		want []Target
	}{
		{
			name: "all met",
			ms: []Measurement{
				{Name: "baseline", EventsPerSec: 100},
				{Name: "sdk-w1", EventsPerSec: 60},
				{Name: "sdk-w2", EventsPerSec: 95},
				{Name: "yaml-w1", CPUSeconds: 0.25, Outcome: Outcome{Events: 2_000_000}},
			},
			want: []Target{
				{Variant: "sdk-w1", Want: 0.5, Got: 0.6, Met: true},
				{Variant: "sdk-w2", Want: 1.5, Got: 95.0 / 60, Met: true},
				{Variant: "yaml-w1", Want: 5e6, Got: 8e6, Met: true},
			},
		},
		{
			name: "all missed",
			ms: []Measurement{
				{Name: "baseline", EventsPerSec: 100},
				{Name: "sdk-w1", EventsPerSec: 20},
				{Name: "sdk-w2", EventsPerSec: 20},
				{Name: "yaml-w1", CPUSeconds: 4, Outcome: Outcome{Events: 2_000_000}},
			},
			want: []Target{
				{Variant: "sdk-w1", Want: 0.5, Got: 0.2},
				{Variant: "sdk-w2", Want: 1.5, Got: 1},
				{Variant: "yaml-w1", Want: 5e6, Got: 5e5},
			},
		},
		{
			// The warm run is judged apart: here it meets what the first
			// (cold) run misses.
			name: "warm runs",
			ms: []Measurement{
				{Name: "baseline", EventsPerSec: 100, WarmEventsPerSec: 100},
				{Name: "sdk-w1", EventsPerSec: 30, WarmEventsPerSec: 55},
				{Name: "yaml-w1", CPUSeconds: 1, WarmCPUSeconds: 0.25, Outcome: Outcome{Events: 2_000_000}},
			},
			want: []Target{
				{Variant: "sdk-w1", Want: 0.5, Got: 0.3},
				{Variant: "sdk-w1", Want: 0.5, Got: 0.55, Met: true},
				{Variant: "yaml-w1", Want: 5e6, Got: 2e6},
				{Variant: "yaml-w1", Want: 5e6, Got: 8e6, Met: true},
			},
		},
		{
			name: "no baseline",
			ms:   []Measurement{{Name: "sdk-w1", EventsPerSec: 20}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			SetRatios(tt.ms)
			got := Targets(tt.ms)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d targets %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Variant != w.Variant || g.Want != w.Want || g.Met != w.Met || fmt.Sprintf("%.4f", g.Got) != fmt.Sprintf("%.4f", w.Got) {
					t.Errorf("target %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// benchEvents is the workload size of the go test benchmarks: large enough
// to cross several windows, small enough for -benchtime=1x runs in CI.
const benchEvents = 1_000_000

func benchmarkVariant(b *testing.B, v Variant) {
	cfg := Config{Events: benchEvents, Keys: DefaultKeys}
	want := ExpectedTotal(cfg)
	b.ReportAllocs()
	for b.Loop() {
		o, err := Run(context.Background(), v, cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := o.Check(cfg, want); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cfg.Events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkBaseline measures the hand-written loop.
func BenchmarkBaseline(b *testing.B) { benchmarkVariant(b, Variant{Kind: KindBaseline, Workers: 1}) }

// BenchmarkSDKPipeline measures the Go SDK pipeline through the runner.
func BenchmarkSDKPipeline(b *testing.B) {
	for _, w := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers=%d", w), func(b *testing.B) { benchmarkVariant(b, Variant{Kind: KindSDK, Workers: w}) })
	}
}

// BenchmarkYAMLPipeline measures the YAML pipeline (CEL filter) through the runner.
func BenchmarkYAMLPipeline(b *testing.B) { benchmarkVariant(b, Variant{Kind: KindYAML, Workers: 1}) }
