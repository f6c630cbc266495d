package sqlsink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/weir-dev/weir/runner/contract"
)

// Held generations: a generation registered behind a façade view that the
// view does not serve yet (the new job of a parallel replacement gated on
// parity writes its table while only the older generations are visible),
// until RevealFacadeGeneration makes it part of the view, in one
// transaction with the view's rebuild.

// FacadeHeldTable records, per façade and generation, whether the view
// holds the generation back (held = 1) or serves it (held = 0, once
// revealed). A generation without a row is served.
const FacadeHeldTable = "weir_facade_held"

const facadeHeldDDL = "CREATE TABLE IF NOT EXISTS " + FacadeHeldTable +
	" (facade TEXT NOT NULL, generation BIGINT NOT NULL, held BIGINT NOT NULL, PRIMARY KEY (facade, generation))"

// fxHeld returns the generations of façade table the view holds back. The
// table need not exist.
func fxHeld(ctx context.Context, fx facadeExec, table string) (map[int64]bool, error) {
	if k, err := fxKind(ctx, fx, FacadeHeldTable); err != nil || k == "" {
		return nil, err
	}
	rows, err := fx.query(ctx, `SELECT generation FROM `+FacadeHeldTable+` WHERE facade = `+ph(fx, 1)+` AND held = 1`, table)
	if err != nil {
		return nil, fmt.Errorf("reading the held generations of %s: %w", table, err)
	}
	out := map[int64]bool{}
	for _, r := range rows {
		g, _ := r[0].(int64)
		out[g] = true
	}
	return out, nil
}

// fxHold records generation gen of table held, unless a row says it was
// revealed already (a sink that sets up after the reveal stays served).
func fxHold(ctx context.Context, fx facadeExec, table string, gen int64) error {
	if err := fx.exec(ctx, facadeHeldDDL); err != nil {
		return fmt.Errorf("creating %s: %w", FacadeHeldTable, err)
	}
	q := `INSERT INTO ` + FacadeHeldTable + ` (facade, generation, held) VALUES (` + ph(fx, 1) + `, ` + ph(fx, 2) +
		`, 1) ON CONFLICT (facade, generation) DO NOTHING`
	if err := fx.exec(ctx, q, table, gen); err != nil {
		return fmt.Errorf("holding generation %d of %s back from its view: %w", gen, table, err)
	}
	return nil
}

// RevealFacadeGeneration makes the view serve generation gen, held back
// until now (Config.FacadeHeld), in one transaction: the generation
// recorded as served and the view rebuilt over it, so a reader of the view
// sees the older generations' rows alone before and the newest
// generation's rows winning after, never a mix. It is idempotent, and a
// generation revealed before its sink first prepares is served from then
// on.
func RevealFacadeGeneration(ctx context.Context, t FacadeTarget, gen int64) error {
	return withFacade(ctx, t, func(fx facadeExec, _ time.Time) error {
		if err := fx.exec(ctx, facadeHeldDDL); err != nil {
			return fmt.Errorf("creating %s: %w", FacadeHeldTable, err)
		}
		q := `INSERT INTO ` + FacadeHeldTable + ` (facade, generation, held) VALUES (` + ph(fx, 1) + `, ` + ph(fx, 2) +
			`, 0) ON CONFLICT (facade, generation) DO UPDATE SET held = 0`
		if err := fx.exec(ctx, q, t.Table, gen); err != nil {
			return fmt.Errorf("revealing generation %d of %s: %w", gen, t.Table, err)
		}
		gens, err := fxGenerations(ctx, fx, t.Table)
		if err != nil || len(gens) == 0 {
			return err // not a view yet: the sink sets it up served
		}
		return fxRebuildView(ctx, fx, t.Table)
	})
}

// GenerationRow is one row of a generation's physical table as a consumer
// of the view would see it (contract.GenerationRow).
type GenerationRow = contract.GenerationRow

// FacadeGenerationRows reads every row of generation gen's table behind
// the façade view (an upsert table holds one row per key and window: its
// newest revision). ok is false when the view has no such generation, or
// its table does not exist yet.
func FacadeGenerationRows(ctx context.Context, t FacadeTarget, gen int64) (rows []GenerationRow, ok bool, err error) {
	err = withFacade(ctx, t, func(fx facadeExec, _ time.Time) error {
		gens, err := fxGenerations(ctx, fx, t.Table)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(gens, func(g facadeGen) bool { return g.generation == gen })
		if i < 0 {
			return nil
		}
		g := gens[i]
		cols, err := fxGenColumns(ctx, fx, g)
		if err != nil || len(cols) == 0 {
			return err
		}
		names := make([]string, len(cols))
		for j, c := range cols {
			names[j] = quoteIdent(c.physical())
		}
		data, err := fx.query(ctx, "SELECT "+strings.Join(names, ", ")+" FROM "+quoteTable(g.physical))
		if err != nil {
			return fmt.Errorf("reading %s: %w", g.physical, err)
		}
		isKey := func(name string) bool {
			return slices.ContainsFunc(g.keys, func(k string) bool { return sameColumn(k, name, fx.pg()) })
		}
		for _, r := range data {
			gr := GenerationRow{Key: map[string]any{}, Values: map[string]any{}}
			for j, c := range cols {
				name := strings.ToLower(c.name)
				switch {
				case name == colWindowStart:
					gr.WindowStart = timeValue(r[j])
				case name == colWindowEnd:
					gr.WindowEnd = timeValue(r[j])
				case isKey(c.name):
					gr.Key[c.name] = r[j]
				case bookkeeping[name] || name == colPane:
					// how the row was written (mutation.go), not what it holds
				default:
					gr.Values[c.name] = r[j]
				}
			}
			rows = append(rows, gr)
		}
		ok = true
		return nil
	})
	return rows, ok, err
}

// timeValue reads a timestamp column's value: a time (PostgreSQL, or a
// SQLite driver that parses it) or its text; zero when null or unreadable.
func timeValue(v any) time.Time {
	switch x := v.(type) {
	case time.Time:
		return x.UTC()
	case string:
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"} {
			if t, err := time.Parse(layout, x); err == nil {
				return t.UTC()
			}
		}
	}
	return time.Time{}
}

// DropFacadeGeneration removes generation gen from behind the façade view,
// in one transaction: its table is dropped and the view rebuilt, so the view
// serves the older generations' rows again. It is the sink side of a
// rollback during an overlap (the new job is cancelled and its rows must
// stop winning). The newest remaining generation keeps serving.
func DropFacadeGeneration(ctx context.Context, t FacadeTarget, gen int64) error {
	return withFacade(ctx, t, func(fx facadeExec, _ time.Time) error {
		gens, err := fxGenerations(ctx, fx, t.Table)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(gens, func(g facadeGen) bool { return g.generation == gen })
		if i < 0 {
			return fmt.Errorf("%w: %s has no generation %d", ErrFacade, t.Table, gen)
		}
		if len(gens) == 1 {
			return fmt.Errorf("%w: generation %d is the only one behind %s; dropping it would leave the view empty", ErrFacade, gen, t.Table)
		}
		if err := fx.exec(ctx, "DROP VIEW IF EXISTS "+quoteTable(t.Table)); err != nil {
			return fmt.Errorf("replacing the view %s: %w", t.Table, err)
		}
		if err := fx.exec(ctx, "DROP TABLE IF EXISTS "+quoteTable(gens[i].physical)); err != nil {
			return fmt.Errorf("dropping %s: %w", gens[i].physical, err)
		}
		if err := fx.exec(ctx, `DELETE FROM `+FacadeTable+` WHERE facade = `+ph(fx, 1)+` AND generation = `+ph(fx, 2), t.Table, gen); err != nil {
			return fmt.Errorf("forgetting generation %d of %s: %w", gen, t.Table, err)
		}
		if err := facadeRenames().forget(ctx, fx, t.Table, gen); err != nil {
			return err
		}
		if k, err := fxKind(ctx, fx, FacadeHeldTable); err != nil {
			return err
		} else if k != "" {
			if err := fx.exec(ctx, `DELETE FROM `+FacadeHeldTable+` WHERE facade = `+ph(fx, 1)+` AND generation = `+ph(fx, 2), t.Table, gen); err != nil {
				return fmt.Errorf("forgetting generation %d of %s: %w", gen, t.Table, err)
			}
		}
		return fxRebuildView(ctx, fx, t.Table)
	})
}
