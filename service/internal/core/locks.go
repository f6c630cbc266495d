package core

import (
	"context"
	"fmt"
	"sync"

	"github.com/weir-dev/weir/errcode"
)

// NameGuards is the table of per-name operation guards (see the lock
// ordering in doc.go). A guard is held by the one operation that may change
// the jobs of a name and its lineage record at a time — submit, update,
// rescale, drain, cancel, a Go program's start, and a supervisor recording
// its job's end — and it may be held across waits for an execution. Reads
// never take it.
type NameGuards struct {
	mu     sync.Mutex            // guards guards; a leaf, held only to look a guard up
	guards map[string]*nameGuard // guarded by mu
}

// nameGuard is one name's guard: a one-slot semaphore, so that waiting for
// it can end with a context, and a count of its holders and waiters, so
// that the table forgets names nobody uses.
type nameGuard struct {
	sem  chan struct{}
	refs int // guarded by NameGuards.mu
}

// lock takes the guard of name, waiting while another operation holds it,
// and returns the function that releases it. It returns ctx's error when
// ctx ends first.
func (g *NameGuards) Lock(ctx context.Context, name string) (unlock func(), err error) {
	g.mu.Lock() // a leaf
	if g.guards == nil {
		g.guards = map[string]*nameGuard{}
	}
	ng := g.guards[name]
	if ng == nil {
		ng = &nameGuard{sem: make(chan struct{}, 1)}
		g.guards[name] = ng
	}
	ng.refs++
	g.mu.Unlock()
	select {
	case ng.sem <- struct{}{}:
	case <-ctx.Done():
		g.release(name, ng)
		return nil, fmt.Errorf("waiting for another operation on job %s: %w", name, ctx.Err())
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-ng.sem
			g.release(name, ng)
		})
	}, nil
}

func (g *NameGuards) release(name string, ng *nameGuard) {
	g.mu.Lock() // a leaf
	defer g.mu.Unlock()
	if ng.refs--; ng.refs == 0 {
		delete(g.guards, name)
	}
}

// updates marks the job names with an update or rescale under way, so
// that a second one is refused at once (UPDATE_IN_PROGRESS) instead of
// queueing behind the first and replacing the job it just started.
type updates struct {
	names sync.Map // job name -> struct{}; set and deleted by begin's caller
}

// begin marks name as being updated and returns the function that clears
// the mark, or UPDATE_IN_PROGRESS when the name is marked already.
func (u *updates) Begin(name string) (end func(), err error) {
	if _, busy := u.names.LoadOrStore(name, struct{}{}); busy {
		return nil, errcode.Errorf(errcode.UpdateInProgress, "job %s is being updated or rescaled by another request: wait until it has finished (weir jobs describe %s), then retry", name, name)
	}
	return func() { u.names.Delete(name) }, nil
}

// changes wakes whoever waits for the service's state to move: it is
// notified after every registry write, every metrics sample and every
// execution the service lets go of. Tests wait on it instead of sleeping.
type changes struct {
	mu sync.Mutex    // a leaf
	ch chan struct{} // guarded by mu; closed and replaced by notify
}

// next returns a channel closed at the next notify.
func (c *changes) Next() <-chan struct{} {
	c.mu.Lock() // a leaf
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// notify wakes every waiter of next.
func (c *changes) Notify() {
	c.mu.Lock() // a leaf
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}
