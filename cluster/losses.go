package cluster

import "sync"

// Elections come before planned moves. A round of leader moves waits up
// to the hand-over wait for the old leaders to drain their writes, and the
// controller's loop waits with it; a node lost meanwhile would have its
// partitions elected only after that wait. So the live nodes reach the
// loop through a nodeFeed, which marks a loss the moment the watch
// delivers it, and a round waiting on drains gives way to it: its moves
// are not stored (their old leaders are told so and write again), the
// loop elects, and a later round plans the moves again.

// nodeFeed relays the watch of live nodes to the controller's loop,
// keeping only the newest list for it, and marks each node's loss at once,
// whatever the loop is doing.
type nodeFeed struct {
	ready chan struct{} // holds a token while a list waits, or once the watch ended

	mu     sync.Mutex
	latest []NodeInfo
	ended  bool
	prev   map[string]bool
	lost   chan struct{} // closed when a node left the list after the loop last took one
	closed bool          // lost is closed
}

func newNodeFeed() *nodeFeed {
	return &nodeFeed{ready: make(chan struct{}, 1), lost: make(chan struct{})}
}

// relay takes in's lists until it closes.
func (f *nodeFeed) relay(in <-chan []NodeInfo) {
	for ns := range in {
		f.put(ns)
	}
	f.end()
}

// put takes the watch's newest list of live nodes.
func (f *nodeFeed) put(ns []NodeInfo) {
	ids := nodeIDs(ns)
	f.mu.Lock()
	for id := range f.prev {
		if !ids[id] && !f.closed {
			close(f.lost)
			f.closed = true
		}
	}
	f.prev, f.latest = ids, ns
	f.mu.Unlock()
	f.signal()
}

func (f *nodeFeed) end() {
	f.mu.Lock()
	f.ended = true
	f.mu.Unlock()
	f.signal()
}

func (f *nodeFeed) signal() {
	select {
	case f.ready <- struct{}{}:
	default:
	}
}

// take returns the newest list once ready has a token; false once the
// watch ended. A loss the list shows is the loop's from then on: the
// next one marks anew.
func (f *nodeFeed) take() ([]NodeInfo, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return nil, false
	}
	if f.closed {
		f.lost, f.closed = make(chan struct{}), false
	}
	return f.latest, true
}

// losses is closed once a node is lost that the loop has not taken in a
// list yet; nil (never closed) without a feed.
func (f *nodeFeed) losses() <-chan struct{} {
	if f == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lost
}
