package runner

// This file counts the keys each keyed step holds, for the job's metrics.
// The count is kept incrementally by the nodes (a key added or dropped
// moves it by one; an adoption recounts from the key groups, which keep
// their own counts), and published to the step's counters after every
// bundle and control message the node handles: one atomic store, so a
// metrics read never scans state.

// countKeys recounts the keys of the key groups the node holds, from the
// groups' own counts (one add per key group, not per key).
func (n *aggNode) countKeys() int64 {
	var c int64
	for _, g := range n.groups {
		if g != nil {
			c += int64(g.n)
		}
	}
	return c
}

func (n *aggNode) nkeysField() *int64 { return &n.nkeys }

// countKeys recounts the keys of the key groups the node holds.
func (n *statefulNode) countKeys() int64 {
	var c int64
	for _, g := range n.groups {
		if g != nil {
			c += int64(g.n)
		}
	}
	return c
}

func (n *statefulNode) nkeysField() *int64 { return &n.nkeys }

// publishKeys stores the node's key count where Metrics reads it, when
// it changed since the last store (a plain compare per bundle otherwise).
func (k *keyed) publishKeys() {
	c := k.sp.counters.keys
	if c == nil {
		return
	}
	if k.nkeys == nil {
		k.nkeys = k.state.nkeysField()
	}
	if v := *k.nkeys; v != k.published || !k.publishedOnce {
		k.published, k.publishedOnce = v, true
		c[k.w.id].Store(v)
	}
}

// keyCount sums the published key counts of a keyed step's instances, and
// reports whether the step is keyed.
func (c *stepCounters) keyCount() (int64, bool) {
	if c.keys == nil {
		return 0, false
	}
	var n int64
	for i := range c.keys {
		n += c.keys[i].Load()
	}
	return n, true
}
