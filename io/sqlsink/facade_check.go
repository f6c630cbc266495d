package sqlsink

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weir-dev/weir/runner/contract"
	"github.com/weir-dev/weir/window"
)

var (
	_ contract.FacadeSink           = (*Sink)(nil)
	_ contract.WindowRestrictedSink = (*Sink)(nil)
	_ contract.BufferingSink        = (*Sink)(nil)
)

// FacadeTable names the sink's table (contract.FacadeSink).
func (s *Sink) FacadeTable() contract.FacadeTable {
	return contract.FacadeTable{Driver: s.cfg.Driver, DSN: s.cfg.DSN, Table: s.cfg.Table, BusyTimeout: s.cfg.BusyTimeout}
}

// RestrictWindows makes the sink leave out the elements of windows keep
// refuses, on top of Config.Owns and earlier restrictions; call it before
// the execution starts (contract.WindowRestrictedSink).
func (s *Sink) RestrictWindows(keep func(window.Window) bool) {
	s.cfg.Owns = contract.Restrict(s.cfg.Owns, keep)
}

// CheckFacadeTable is the check, changing nothing, that the sink's table
// can become (or already is) a façade view with this sink's generation
// behind it: a plain table of that name must have every key column of the
// sink (it is migrated behind the view), and the generations already
// behind a view must key their rows alike. A parallel replacement runs it
// before anything changes, since the sink itself meets the table only at
// its first commit, after the old job was told to make way.
func (s *Sink) CheckFacadeTable(ctx context.Context) error {
	c := s.cfg
	me := facadeGen{generation: c.Generation, mode: s.l.mode(), keys: s.l.keyColumnNames()}
	t := FacadeTarget{Driver: c.Driver, DSN: c.DSN, Table: c.Table, BusyTimeout: c.BusyTimeout, Now: c.Now}
	return withFacade(ctx, t, func(fx facadeExec, _ time.Time) error {
		kind, err := fxKind(ctx, fx, c.Table)
		if err != nil {
			return err
		}
		if err := facadeKindOK(ctx, fx, c.Table, kind); err != nil {
			return err
		}
		if kind == "table" {
			cols, err := fxColumns(ctx, fx, c.Table)
			if err != nil {
				return err
			}
			for _, k := range me.keys {
				if !hasColumn(cols, k, fx.pg()) {
					return fmt.Errorf("%w: table %s has no column %s, so its rows cannot be keyed like the sink's (%s) behind a façade view; "+
						"write to a new table", ErrTableShape, c.Table, k, strings.Join(me.keys, ", "))
				}
			}
		}
		return fxSameKey(ctx, fx, c.Table, me)
	})
}
