package runner

import "slices"

// cells are a stateful step's cells of one kind in one window (its value
// cells, bags, maps or timers), ordered by id. A step declares a few
// cells: a slice searched in order holds one in a few words, where a Go
// map cost about 300 bytes per window (a million keys of one value cell
// held 607 bytes of heap each, 338 of them the map). The order by id also
// makes a checkpoint's encoding of a key, and the order in which a
// restore sets its timers, independent of the order they were written in.
type cells[T any] []cell[T]

// cell is one cell.
type cell[T any] struct {
	id string
	v  T
}

// find returns the index of cell id, or where it would go, and whether it
// is there.
func (cs cells[T]) find(id string) (int, bool) {
	for i := range cs {
		switch {
		case cs[i].id == id:
			return i, true
		case cs[i].id > id:
			return i, false
		}
	}
	return len(cs), false
}

// get returns cell id's value and whether it is set.
func (cs cells[T]) get(id string) (T, bool) {
	if i, ok := cs.find(id); ok {
		return cs[i].v, true
	}
	var zero T
	return zero, false
}

// set sets cell id to v.
func (cs *cells[T]) set(id string, v T) {
	*cs.ref(id) = v
}

// ref returns cell id's value to change in place, adding the cell (at its
// zero value) when it is not set. The pointer is valid until the next
// change of cs.
func (cs *cells[T]) ref(id string) *T {
	i, ok := cs.find(id)
	if !ok {
		*cs = slices.Insert(*cs, i, cell[T]{id: id})
	}
	return &(*cs)[i].v
}

// del clears cell id.
func (cs *cells[T]) del(id string) {
	if i, ok := cs.find(id); ok {
		*cs = slices.Delete(*cs, i, i+1)
	}
}
