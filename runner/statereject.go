package runner

import (
	"fmt"
	"strings"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

// reportStateRejects sends the stored state of key (keyStr its canonical
// encoding) that step's code refused to carry over at a restore — values
// dropped (contract.ErrStateDropped) or accumulators kept in part
// (contract.PartialStateError) — to the run's dead-letter hook, when it
// has one: each a reject whose element names the key, the window, the
// state cell (and a map entry's key) and the stored bytes. The step's code
// counts them (contract.StateRejecter). Their Key makes a replay of the
// same restore publish each once.
func reportStateRejects(w *worker, step string, key any, keyStr string, dropped []droppedState) error {
	dl := w.r.opts.DeadLetter
	if dl == nil {
		return nil
	}
	for _, d := range dropped {
		cell, _, _ := strings.Cut(d.cell, "#")
		el := map[string]any{"key": key, "state": cell}
		if d.cell != contract.AccumulatorCell {
			el["stored"] = string(d.stored) // a cell's value as the code encoded it (JSON for the Go SDK)
		}
		if !d.win.IsGlobal() {
			el["window"] = map[string]any{"start": d.win.Start, "end": d.win.End}
		}
		id := fmt.Sprintf("%q/%d-%d/%s", keyStr, d.win.Start, d.win.End, cell)
		if d.mapKey != nil {
			el["map_key"] = d.mapKey
			id += fmt.Sprintf("/%v", d.mapKey)
		}
		rj := contract.Reject{Element: el, Step: step, Reason: d.reason, Key: id,
			Message: fmt.Sprintf("state %q of key %v: %v", cell, key, d.err)}
		if err := dl(w.r.ctx, rj); err != nil {
			return fmt.Errorf("sending a stored state of step %q that did not carry over to the dead-letter topic: %w", step, err)
		}
	}
	return nil
}

// reportAdopted sends what the step's code could not carry over of acc —
// the accumulator of k in window w, adopted from the execution this one
// replaced and carried over when first used (contract.AdoptedStateRejecter)
// — to the run's dead-letter hook, as a restore reports a stored one.
func (n *aggNode) reportAdopted(k *aggKey, w window.Window, acc any) error {
	return n.reportAdoptedErrs(k, w, n.adoptedRej.TakeStateRejects(acc))
}

// reportAdoptedErrs sends errs, taken from adopted accumulators of k now in
// window w, to the run's dead-letter hook (reportAdopted).
func (n *aggNode) reportAdoptedErrs(k *aggKey, w window.Window, errs []*contract.PartialStateError) error {
	if len(errs) == 0 {
		return nil
	}
	dropped := make([]droppedState, len(errs))
	for i, e := range errs {
		dropped[i] = droppedState{win: w, cell: contract.AccumulatorCell, reason: e.Reason, err: e}
	}
	shown := k.val()
	if shown == nil {
		shown = k.enc()
		if n.sc != nil {
			if key, err := n.sc.DecodeKey([]byte(k.enc())); err == nil {
				shown = key
			}
		}
	}
	return reportStateRejects(n.w, n.sp.step.Name, shown, k.enc(), dropped)
}
