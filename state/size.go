package state

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// exactSizeLimit is the on-disk size below which StateSize counts a
// step's keys and values one by one (a scan of at most a few megabytes);
// above it, Pebble's estimate from its table metadata is the answer.
const exactSizeLimit = 8 << 20

// StateSize returns the size of the keyed state stored for step of
// lineage (what its last checkpoint holds): for small state the bytes of
// its keys and values, exactly (exact is true); for state whose files
// take exactSizeLimit or more, Pebble's estimate of the disk space its
// files take (compressed; rows still in the memtable are not counted). A
// step with no state is 0, exact.
//
// each, when set, is called with the value of every entry when the size is
// counted exactly (the scan a caller would otherwise repeat), valid during
// the call only.
func (s *Store) StateSize(ctx context.Context, lineage, step string, each func(value []byte)) (size int64, exact bool, err error) {
	h, err := s.acquire()
	if err != nil {
		return 0, false, fmt.Errorf("measuring the state of step %q: %w", step, err)
	}
	defer h.release()
	ns, ok, err := h.lookupNamespace(lineage, step)
	if err != nil || !ok {
		return 0, err == nil, err
	}
	lo := nsPrefix(ns)
	hi := prefixEnd(lo)
	est, err := h.db.EstimateDiskUsage(lo, hi)
	if err != nil {
		return 0, false, fmt.Errorf("measuring the state of step %q: %w", step, err)
	}
	if est >= exactSizeLimit {
		return int64(est), false, nil
	}
	it, err := h.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return 0, false, fmt.Errorf("measuring the state of step %q: %w", step, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if err := ctx.Err(); err != nil {
			return 0, false, err
		}
		size += int64(len(it.Key()) + len(it.Value()))
		if each != nil {
			each(it.Value())
		}
	}
	if err := it.Error(); err != nil {
		return 0, false, fmt.Errorf("measuring the state of step %q: %w", step, err)
	}
	return size, true, nil
}

// ScanStateValues calls fn with the value of each entry of the keyed
// state of step in lineage as its last checkpoint stored it, in key
// order, up to limit entries. It returns how many it scanned and whether
// that was all of them (a step without state scans none, completely).
// The values are valid during fn only.
func (s *Store) ScanStateValues(ctx context.Context, lineage, step string, limit int, fn func(value []byte)) (scanned int, complete bool, err error) {
	h, err := s.acquire()
	if err != nil {
		return 0, false, fmt.Errorf("reading the state of step %q: %w", step, err)
	}
	defer h.release()
	ns, ok, err := h.lookupNamespace(lineage, step)
	if err != nil || !ok {
		return 0, err == nil, err
	}
	lo := nsPrefix(ns)
	it, err := h.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return 0, false, fmt.Errorf("reading the state of step %q: %w", step, err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		if scanned == limit {
			return scanned, false, nil
		}
		if err := ctx.Err(); err != nil {
			return scanned, false, err
		}
		fn(it.Value())
		scanned++
	}
	if err := it.Error(); err != nil {
		return scanned, false, fmt.Errorf("reading the state of step %q: %w", step, err)
	}
	return scanned, true, nil
}
