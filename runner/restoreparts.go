package runner

// This file restores a keyed step's key groups with several goroutines:
// each reads and decodes a contiguous range of the worker's key groups
// (the store's reads and the decoding are most of a restore's time), and
// the worker puts the decoded keys into its groups, one group at a time. A
// default job has one worker: without this, its restore used one core.
// Aggregations (aggrestore.go) and stateful steps (stateful.go) restore
// so.

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// maxRestoreParts bounds the goroutines a worker restores with.
const maxRestoreParts = 8

// minRestoreGroups is the fewest key groups a restoring goroutine reads.
const minRestoreGroups = 16

// restoreParts returns how many goroutines a worker that owns nkgs key
// groups restores a keyed step with (Options.RestoreParts).
func (r *run) restoreParts(nkgs int) int {
	p := r.opts.RestoreParts
	if p <= 0 {
		p = min((runtime.GOMAXPROCS(0)+len(r.workers)-1)/len(r.workers), maxRestoreParts, nkgs/minRestoreGroups)
	}
	return max(1, min(p, nkgs))
}

// restoreBatch is what a restoring goroutine decoded of one key group.
type restoreBatch[T any] struct {
	kg    uint16
	items []T
}

// restoreInParts restores the key groups kgs of step k with parts
// goroutines: each scans a contiguous range of kgs from the checkpoint and
// decodes every entry with decode, which must be safe to call from several
// goroutines at once and must not keep key or value (the store lends
// them). The calling goroutine (the worker) hands the key groups to apply
// in kgs's order, as a restore with one goroutine does: timers due at the
// same time then fire in the same order whatever the goroutines' pace (the
// timer heaps order by time, then by the order they were set). Each
// goroutine's channel holds all of its key groups, so none waits for the
// worker: the keys it decodes are the state kept anyway, and a queued
// group costs a slice of them. The first error stops every goroutine and
// is returned.
func restoreInParts[T any](k *keyed, kgs []int, parts int,
	decode func(kg uint16, key, value []byte) (T, error),
	apply func(restoreBatch[T]) error) error {
	ctx, cancel := context.WithCancel(k.w.r.ctx)
	defer cancel()
	var (
		errMu   sync.Mutex // guards firstEr; a leaf
		firstEr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstEr == nil {
			firstEr = err
		}
		errMu.Unlock()
		cancel()
	}
	size := (len(kgs) + parts - 1) / parts
	var outs []chan restoreBatch[T]
	for lo := 0; lo < len(kgs); lo += size {
		part := kgs[lo:min(lo+size, len(kgs))]
		out := make(chan restoreBatch[T], len(part))
		outs = append(outs, out)
		go func() {
			defer close(out)
			defer func() {
				if p := recover(); p != nil {
					fail(k.w.r.recovered(p, k.sp.idx+1))
				}
			}()
			if err := scanBatches(ctx, k, part, decode, out); err != nil {
				fail(err)
			}
		}()
	}
	for _, out := range outs {
		for b := range out {
			if ctx.Err() != nil {
				continue // failing: the goroutines stop, their channels close
			}
			if err := apply(b); err != nil {
				fail(err)
			}
		}
	}
	errMu.Lock()
	defer errMu.Unlock()
	if firstEr == nil && k.w.r.ctx.Err() != nil {
		return fmt.Errorf("restoring step %q: %w", k.sp.step.Name, k.w.r.ctx.Err())
	}
	return firstEr
}

// scanBatches reads and decodes the entries of key groups kgs and sends
// them to out a key group at a time (out has room for all of them). It
// stops when ctx ends.
func scanBatches[T any](ctx context.Context, k *keyed, kgs []int,
	decode func(kg uint16, key, value []byte) (T, error), out chan<- restoreBatch[T]) error {
	var cur restoreBatch[T]
	send := func() bool {
		if len(cur.items) == 0 {
			return true
		}
		select {
		case out <- cur:
			cur = restoreBatch[T]{}
			return true
		case <-ctx.Done():
			return false
		}
	}
	err := k.w.r.opts.Restore.State.Scan(ctx, k.sp.step.Name, kgs, func(kg uint16, key, value []byte) error {
		if kg != cur.kg && !send() {
			return ctx.Err()
		}
		cur.kg = kg
		item, err := decode(kg, key, value)
		if err != nil {
			return err
		}
		cur.items = append(cur.items, item)
		return nil
	})
	if err == nil && !send() {
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("restoring step %q: %w", k.sp.step.Name, err)
	}
	return nil
}
