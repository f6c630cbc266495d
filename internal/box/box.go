// Package box puts values into interfaces without one heap allocation per
// value: values are copied into a small slab and the interface points into
// it. Converting a non-pointer value of more than a machine word to `any`
// otherwise allocates every time, which dominates the per-element cost of
// sources that generate values.
//
// Boxed values must be treated as immutable (as every element in a pipeline
// is). A slab stays alive while any value boxed from it is referenced, so
// slabs are kept to about slabBytes.
//
// It may import only the standard library (unsafe and reflect). The interface layout it relies on
// (a type word and a data pointer; pointer-shaped types stored directly in
// the data word) has been Go's since Go 1.4; TestBoxedValuesBehave pins it.
package box

import (
	"reflect"
	"unsafe"
)

// slabBytes bounds the memory a slab holds.
const slabBytes = 4096

type eface struct {
	typ  unsafe.Pointer
	data unsafe.Pointer
}

// Boxer boxes values of type T. It is not safe for concurrent use: give
// each goroutine its own.
type Boxer[T any] struct {
	// slab[:used] holds the values boxed so far. The slab is replaced only
	// when full and otherwise never stored to: a slice store per value
	// would cost a GC write barrier per value while the collector marks.
	slab   []T
	used   int
	typ    unsafe.Pointer
	direct bool
	size   int
}

// New returns a Boxer for T.
func New[T any]() *Boxer[T] {
	var zero T
	z := any(zero)
	b := &Boxer[T]{typ: (*eface)(unsafe.Pointer(&z)).typ, direct: storedDirectly(reflect.TypeFor[T]())}
	b.size = slabBytes / int(max(unsafe.Sizeof(zero), 1))
	if b.size < 1 {
		b.size = 1
	}
	return b
}

// storedDirectly reports whether values of t are kept in the interface's
// data word itself (pointer-shaped types); those need no boxing.
func storedDirectly(t reflect.Type) bool {
	if t == nil {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Chan, reflect.Func, reflect.UnsafePointer:
		return true
	case reflect.Struct:
		if t.NumField() == 1 {
			return storedDirectly(t.Field(0).Type)
		}
		if t.Size() == 0 {
			return true
		}
	case reflect.Array:
		if t.Len() == 1 {
			return storedDirectly(t.Elem())
		}
		if t.Size() == 0 {
			return true
		}
	case reflect.Interface:
		return true // an interface value is boxed as itself by any(v)
	}
	return false
}

// Box returns v as an interface, allocating a new slab only every few calls.
func (b *Boxer[T]) Box(v T) any {
	if b.direct {
		return any(v)
	}
	if b.used == len(b.slab) {
		b.slab, b.used = make([]T, b.size), 0
	}
	p := &b.slab[b.used]
	*p = v
	b.used++
	var out any
	e := (*eface)(unsafe.Pointer(&out))
	e.typ = b.typ
	e.data = unsafe.Pointer(p)
	return out
}
