// Package genrows makes the rows of the YAML Generate source (weir's
// synthetic source for demos, tests and benchmarks): element i is {id: i,
// key: "key-K", amount: A, ts: start + i*spacing}, with K uniform over
// [0, keys) and A uniform over [1, max_amount], both drawn from a hash of
// (seed, i), so a seed always yields the same rows whatever the number of
// workers.
//
// It may import row, mtime, internal/box and the standard library.
package genrows

import (
	"strconv"

	"github.com/weir-dev/weir/internal/box"
	"github.com/weir-dev/weir/mtime"
	"github.com/weir-dev/weir/row"
)

// Schema is the schema of Generate's rows.
func Schema() *row.Schema {
	return row.MustSchema(
		row.Field{Name: "id", Type: row.Of(row.KindInt)},
		row.Field{Name: "key", Type: row.Of(row.KindString)},
		row.Field{Name: "amount", Type: row.Of(row.KindInt)},
		row.Field{Name: "ts", Type: row.Of(row.KindTimestamp)},
	)
}

// Config is Generate's configuration, as the loader checked it.
type Config struct {
	Seed uint64
	// Keys is the number of distinct keys (at least 1); MaxAmount the
	// largest amount (at least 1).
	Keys, MaxAmount int64
	// Start is element 0's event time; Spacing the event time between
	// consecutive elements.
	Start   mtime.Time
	Spacing mtime.Duration
}

// maxBoxedKeys is how many key strings are boxed in advance; keys beyond
// are formatted per row.
const maxBoxedKeys = 1 << 16

// Generator makes Generate's rows (the package doc says which).
type Generator struct {
	schema  *row.Schema
	seed    uint64
	keys    uint64
	start   mtime.Time
	spacing mtime.Duration
	keyVals []any // boxed key strings, precomputed
	amounts []any // boxed amounts, precomputed
}

// New returns the generator of c.
func New(c Config) *Generator {
	g := &Generator{schema: Schema(), seed: c.Seed, keys: uint64(c.Keys), start: c.Start, spacing: c.Spacing}
	g.keyVals = make([]any, min(c.Keys, maxBoxedKeys))
	for i := range g.keyVals {
		g.keyVals[i] = "key-" + strconv.Itoa(i)
	}
	g.amounts = make([]any, c.MaxAmount)
	for i := range g.amounts {
		g.amounts[i] = int64(i + 1)
	}
	return g
}

// Schema returns the schema of the generator's rows.
func (g *Generator) Schema() *row.Schema { return g.schema }

// genRow allocates a row and its values together.
type genRow struct {
	r row.Row
	v [4]any
}

// genRowSlab is how many rows a split allocates at once: one allocation
// per 32 rows instead of one per row. A row kept downstream keeps its
// slab (about 3 KB) alive; Generate feeds demos, tests and benchmarks,
// whose rows are consumed as they pass.
const genRowSlab = 32

// rowMaker is one split's row function (weir.GenerateEach): it allocates
// rows from a slab of its own and boxes the id and the event time from
// slabs, so a generated row costs no allocation of its own.
type rowMaker struct {
	g *Generator
	// rows[used:] are free. The slab is replaced only when full: a slice
	// store per row would cost a GC write barrier per row while the
	// collector marks.
	rows []genRow
	used int
	ids  *box.Boxer[int64]
	ts   *box.Boxer[mtime.Time]
}

// NewRowMaker returns the row function of one split (weir.GenerateEach):
// it keeps state of its own and must be called from one goroutine.
func (g *Generator) NewRowMaker() func(i int64) *row.Row {
	m := &rowMaker{g: g, ids: box.New[int64](), ts: box.New[mtime.Time]()}
	return m.row
}

func (m *rowMaker) row(i int64) *row.Row {
	g := m.g
	h := mix64(g.seed ^ (uint64(i) * 0x9E3779B97F4A7C15))
	k := h % g.keys
	var key any
	if k < uint64(len(g.keyVals)) {
		key = g.keyVals[k]
	} else {
		key = "key-" + strconv.FormatUint(k, 10)
	}
	if m.used == len(m.rows) {
		m.rows, m.used = make([]genRow, genRowSlab), 0
	}
	gr := &m.rows[m.used]
	m.used++
	// Field by field: assigning whole arrays or rows would cost a bulk GC
	// write barrier per row while the collector marks.
	gr.v[0] = m.ids.Box(i)
	gr.v[1] = key
	gr.v[2] = g.amounts[(h>>32)%uint64(len(g.amounts))]
	gr.v[3] = m.ts.Box(g.start + mtime.Time(i)*mtime.Time(g.spacing))
	gr.r.Schema = g.schema
	gr.r.Values = gr.v[:]
	return &gr.r
}

// mix64 is SplitMix64's finaliser.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}
