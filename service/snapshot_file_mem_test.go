package service

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestImportMemory measures the heap an import of the snapshot file named
// by WEIR_IMPORT_MEM_FILE takes (for docs/BENCHMARKS.md; e.g. a file
// exported by `weir bench snapshot --keys 1000000`). It asserts nothing
// about the figures, only that the import succeeds; skipped without the
// variable.
func TestImportMemory(t *testing.T) {
	// Not parallel: the heap it reports must be its own.
	path := os.Getenv("WEIR_IMPORT_MEM_FILE")
	if path == "" {
		t.Skip("set WEIR_IMPORT_MEM_FILE to a snapshot file")
	}
	s := openService(t, filepath.Join(t.TempDir(), "data"))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, allocBase := ms.HeapInuse, ms.TotalAlloc
	stop, peakc := make(chan struct{}), make(chan uint64, 1)
	go func() {
		var peak uint64
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			select {
			case <-stop:
				peakc <- peak
				return
			case <-tick.C:
			}
		}
	}()
	at := time.Now()
	snap, err := s.ImportSnapshot(context.Background(), f, 0)
	took := time.Since(at)
	close(stop)
	peak := <-peakc
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	t.Logf("imported %s: %d file bytes, %d bytes of data in %s (%.1f MB/s); heap in use: %.1f MiB before, peak %.1f MiB (+%.1f MiB); allocated %.1f MiB",
		snap.ID, st.Size(), snap.DiskSizeBytes, took.Round(time.Millisecond), float64(st.Size())/1e6/took.Seconds(),
		float64(base)/(1<<20), float64(peak)/(1<<20), (float64(peak)-float64(base))/(1<<20), float64(ms.TotalAlloc-allocBase)/(1<<20))
}
