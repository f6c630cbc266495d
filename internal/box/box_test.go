package box

import (
	"runtime"
	"testing"
)

type pair struct{ K, V int64 }

type withPtr struct {
	S string
	N int
}

type onePtr struct{ P *int }

func TestBoxedValuesBehave(t *testing.T) {
	b := New[pair]()
	var boxed []any
	for i := int64(0); i < 10000; i++ {
		boxed = append(boxed, b.Box(pair{i, -i}))
	}
	runtime.GC()
	for i, x := range boxed {
		p, ok := x.(pair)
		if !ok || p.K != int64(i) || p.V != -int64(i) {
			t.Fatalf("boxed[%d] = %#v", i, x)
		}
		if x != any(pair{int64(i), -int64(i)}) {
			t.Fatalf("boxed[%d] does not compare equal to a plainly boxed value", i)
		}
	}
	// Values holding pointers survive GC through the slab.
	sb := New[withPtr]()
	var ws []any
	for i := 0; i < 5000; i++ {
		ws = append(ws, sb.Box(withPtr{S: string(rune('a' + i%26)), N: i}))
	}
	runtime.GC()
	runtime.GC()
	for i, x := range ws {
		if w := x.(withPtr); w.N != i || w.S != string(rune('a'+i%26)) {
			t.Fatalf("ws[%d] = %#v", i, w)
		}
	}
	// Pointer-shaped types are stored directly.
	n := 7
	pb := New[onePtr]()
	if !pb.direct {
		t.Fatal("a one-pointer struct must be stored directly")
	}
	if got := pb.Box(onePtr{&n}).(onePtr); *got.P != 7 {
		t.Fatal("direct boxing lost the value")
	}
	if !New[*int]().direct || !New[map[int]int]().direct || New[int64]().direct || New[string]().direct {
		t.Fatal("storedDirectly misclassifies a basic type")
	}
}

func BenchmarkBox(b *testing.B) {
	bx := New[pair]()
	var sink any
	b.Run("slab", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sink = bx.Box(pair{int64(i), 1})
		}
	})
	b.Run("plain", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sink = any(pair{int64(i), 1})
		}
	})
	_ = sink
}
