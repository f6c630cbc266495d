package runner

// timerOrder is a slice of timers kept as a binary min-heap, ordered by its
// less method: a keyed step's event-time and processing-time timers.
type timerOrder[E any] interface {
	~[]E
	less(i, j int) bool
}

// The heap functions below follow container/heap's algorithms step for
// step, so timers due at the same time fire in the order they always did.
// They take the elements as they are: container/heap passes each element
// pushed and popped through an interface, one allocation of the timer
// (48 bytes and more) each time, two for every window of every key.

// heapPush adds timer x to heap h.
func heapPush[H timerOrder[E], E any](h *H, x E) {
	*h = append(*h, x)
	heapUp(*h, len(*h)-1)
}

// heapPop removes and returns the first timer of heap h, which must not be
// empty. The slot it leaves is cleared: it would keep the timer's key
// (its record, or its encoding) alive.
func heapPop[H timerOrder[E], E any](h *H) E {
	old := *h
	n := len(old) - 1
	old[0], old[n] = old[n], old[0]
	heapDown(old, 0, n)
	x := old[n]
	var zero E
	old[n] = zero
	*h = old[:n]
	return x
}

// heapInit orders h as a heap.
func heapInit[H timerOrder[E], E any](h H) {
	n := len(h)
	for i := n/2 - 1; i >= 0; i-- {
		heapDown(h, i, n)
	}
}

// heapUp moves element j of h up to its place.
func heapUp[H timerOrder[E], E any](h H, j int) {
	for {
		i := (j - 1) / 2 // parent
		if i == j || !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

// heapDown moves element i0 of h[:n] down to its place.
func heapDown[H timerOrder[E], E any](h H, i0, n int) {
	i := i0
	for {
		j1 := 2*i + 1
		if j1 >= n || j1 < 0 { // j1 < 0 after an int overflow
			break
		}
		j := j1 // left child
		if j2 := j1 + 1; j2 < n && h.less(j2, j1) {
			j = j2 // right child
		}
		if !h.less(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
