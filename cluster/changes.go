package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// LeaderChange is one change a partition's leader makes to the partition's
// state: Apply edits a copy of the stored state, provided Leader still leads
// it, and may refuse (an error) or find nothing to do (errUnchanged).
type LeaderChange struct {
	Ref    PartitionRef
	Leader string
	What   string // "shrink ISR of", for errors
	Apply  func(*PartitionState) error
}

// ShrinkISRChange is ShrinkISR as a LeaderChange.
func ShrinkISRChange(ref PartitionRef, leader string, remove []string) LeaderChange {
	return LeaderChange{Ref: ref, Leader: leader, What: "shrink ISR of", Apply: func(st *PartitionState) error {
		if slices.Contains(remove, leader) {
			return fmt.Errorf("leader %q cannot remove itself; a new leader must be elected", leader)
		}
		next, changed, err := shrunk(*st, leader, remove)
		switch {
		case err != nil:
			return err
		case !changed:
			return errUnchanged
		}
		*st = next
		return nil
	}}
}

// JoinISRChange is JoinISR as a LeaderChange.
func JoinISRChange(ref PartitionRef, leader, node string) LeaderChange {
	return LeaderChange{Ref: ref, Leader: leader, What: "join ISR of", Apply: func(st *PartitionState) error {
		if slices.Contains(st.ISR, node) {
			return errUnchanged
		}
		if !slices.Contains(st.Catchup, node) {
			return fmt.Errorf("%q is not catching up", node)
		}
		st.EpochForWrite++
		st.ISR = append(st.ISR, node)
		st.Catchup = slices.DeleteFunc(st.Catchup, func(n string) bool { return n == node })
		return nil
	}}
}

// DisableWritesChange is DisableWrites as a LeaderChange.
func DisableWritesChange(ref PartitionRef, leader string) LeaderChange {
	return LeaderChange{Ref: ref, Leader: leader, What: "disable writes of", Apply: func(st *PartitionState) error {
		st.WriteDisabled = true
		return nil
	}}
}

// ReenableWritesChange is ReenableWrites as a LeaderChange.
func ReenableWritesChange(ref PartitionRef, leader string) LeaderChange {
	return LeaderChange{Ref: ref, Leader: leader, What: "re-enable writes of", Apply: func(st *PartitionState) error {
		st.EpochForWrite++
		st.WriteDisabled = false
		return nil
	}}
}

// next applies ch to current, the state stored now. store is false when
// the result is final already: refused, or nothing to change (current,
// with no error).
func (ch LeaderChange) next(current PartitionState) (next PartitionState, store bool, err error) {
	name := ch.Ref.String()
	if current.Leader != ch.Leader {
		return current, false, fmt.Errorf("%s %s: %q is not the leader: %w", ch.What, name, ch.Leader, ErrConflict)
	}
	next = current
	next.ISR, next.Catchup = slices.Clone(current.ISR), slices.Clone(current.Catchup)
	switch err := ch.Apply(&next); {
	case errors.Is(err, errUnchanged):
		return current, false, nil
	case err != nil:
		return current, false, fmt.Errorf("%s %s: %w", ch.What, name, err)
	}
	return next, true, nil
}

// ChangeAll applies many leader changes in few transactions: the states
// are read together, changed, and stored with CompareAndSwapAll. A
// partition changed concurrently is changed again from what is stored now,
// a bounded number of times, while the others are done. The results are in
// the order of changes; a partition given twice fails the second time.
func (a *Assignments) ChangeAll(ctx context.Context, changes []LeaderChange) []SwapResult {
	return a.changeFrom(ctx, changes, nil)
}

// changeFrom is ChangeAll starting from the states known gives (its
// caller's view of the partitions, from the watch), where they call for a
// change: its compare then checks them, and only the partitions changed
// since are read again, instead of a read of every partition first. Through
// a failover a node's leaders shrink thousands of ISRs in batches that
// each cost etcd a read and a swap otherwise. A known state that calls for
// no change, or refuses it, is read before that is answered: it may be
// older than the state that decides.
func (a *Assignments) changeFrom(ctx context.Context, changes []LeaderChange, known func(PartitionRef) (PartitionState, bool)) []SwapResult {
	results := make([]SwapResult, len(changes))
	current := make([]PartitionState, len(changes))
	var refs []PartitionRef
	var unknown []int
	for i, ch := range changes {
		if known != nil {
			if st, ok := known(ch.Ref); ok && st.Revision != 0 {
				if _, store, _ := ch.next(st); store {
					current[i] = st
					continue
				}
			}
		}
		refs, unknown = append(refs, ch.Ref), append(unknown, i)
	}
	todo := make([]int, 0, len(changes))
	read, err := a.GetAll(ctx, refs)
	for j, i := range unknown {
		if err != nil {
			results[i].Err = fmt.Errorf("%s %s: %w", changes[i].What, changes[i].Ref, err)
			continue
		}
		current[i] = read[j]
	}
	for i := range changes {
		if results[i].Err == nil {
			todo = append(todo, i)
		}
	}
	for range maxSwapAttempts {
		var next []PartitionState
		var at []int
		for _, i := range todo {
			ch := changes[i]
			if current[i].Revision == 0 {
				results[i].Err = fmt.Errorf("%s %s: %w", ch.What, ch.Ref, ErrPartitionNotFound)
				continue
			}
			st, store, err := ch.next(current[i])
			if !store {
				results[i] = SwapResult{Stored: st, Err: err}
				continue
			}
			next, at = append(next, st), append(at, i)
		}
		todo = todo[:0]
		for j, res := range a.CompareAndSwapAll(ctx, next) {
			i := at[j]
			if errors.Is(res.Err, ErrConflict) && !errors.Is(res.Err, ErrPartitionNotFound) && res.Stored.Revision != 0 {
				current[i] = res.Stored
				todo = append(todo, i)
				continue
			}
			results[i] = res
		}
		if len(todo) == 0 {
			return results
		}
	}
	for _, i := range todo {
		results[i].Err = fmt.Errorf("%s %s: gave up after %d concurrent changes: %w", changes[i].What, changes[i].Ref, maxSwapAttempts, ErrConflict)
	}
	return results
}

// GetAll reads the states of many partitions in few transactions, in the
// order of refs; a partition that does not exist comes back with Revision 0.
func (a *Assignments) GetAll(ctx context.Context, refs []PartitionRef) ([]PartitionState, error) {
	states := make([]PartitionState, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, swapParallelism)
	for start := 0; start < len(refs); start += maxTxnPartitions {
		end := min(start+maxTxnPartitions, len(refs))
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			errs[start] = a.getBatch(ctx, refs[start:end], states[start:end])
		})
	}
	wg.Wait()
	return states, errors.Join(errs...)
}

func (a *Assignments) getBatch(ctx context.Context, refs []PartitionRef, into []PartitionState) error {
	gets := make([]clientv3.Op, len(refs))
	for i, r := range refs {
		gets[i] = clientv3.OpGet(a.key(r.Topic, r.Partition))
	}
	resp, err := a.cli.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return err
	}
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		if into[i], err = decodePartition(kvs[0]); err != nil {
			return err
		}
	}
	return nil
}

// Changer gathers the leader changes a node's partitions ask for at the
// same moment into ChangeAll batches. When a follower node dies, every
// partition it followed here shrinks its ISR at once: thousands of
// read-and-swap round trips, each through etcd's raft, would compete with
// the controller electing new leaders for the partitions it led. One batch
// runs at a time, and what arrives meanwhile goes in the next, so a change
// asked alone is stored at once and a burst in few transactions.
type Changer struct {
	a *Assignments
	// Known, if set, gives the state of a partition as the node last saw
	// it (its watch): a batch starts from those (changeFrom).
	Known func(PartitionRef) (PartitionState, bool)

	mu      sync.Mutex
	queue   []*changeCall
	running bool
}

type changeCall struct {
	ch       LeaderChange
	deadline time.Time // zero: none
	done     chan SwapResult
}

// changeTimeout bounds a batch whose callers set no deadline.
const changeTimeout = 5 * time.Second

// NewChanger batches the leader changes of one node.
func NewChanger(a *Assignments) *Changer { return &Changer{a: a} }

// Change stores ch in the next batch and returns its outcome, as
// leaderChange would: the stored state, or an error with the state stored
// now. When ctx ends first the change may still be stored.
func (c *Changer) Change(ctx context.Context, ch LeaderChange) (PartitionState, error) {
	call := &changeCall{ch: ch, done: make(chan SwapResult, 1)}
	call.deadline, _ = ctx.Deadline()
	c.mu.Lock()
	c.queue = append(c.queue, call)
	if !c.running {
		c.running = true
		go c.run()
	}
	c.mu.Unlock()
	select {
	case res := <-call.done:
		return res.Stored, res.Err
	case <-ctx.Done():
		return PartitionState{}, fmt.Errorf("%s %s: %w", ch.What, ch.Ref, context.Cause(ctx))
	}
}

func (c *Changer) run() {
	for {
		c.mu.Lock()
		batch := nextBatch(&c.queue)
		if len(batch) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		c.store(batch)
	}
}

// nextBatch takes from queue the calls of a batch, in order, leaving a
// second change of a partition for the next one: a batch changes each
// partition once.
func nextBatch(queue *[]*changeCall) []*changeCall {
	var batch, rest []*changeCall
	seen := map[PartitionRef]bool{}
	for _, call := range *queue {
		if seen[call.ch.Ref] {
			rest = append(rest, call)
			continue
		}
		seen[call.ch.Ref] = true
		batch = append(batch, call)
	}
	*queue = rest
	return batch
}

// store runs one batch until the last of its callers' deadlines.
func (c *Changer) store(batch []*changeCall) {
	var deadline time.Time
	for _, call := range batch {
		d := call.deadline
		if d.IsZero() {
			d = time.Now().Add(changeTimeout)
		}
		if d.After(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	changes := make([]LeaderChange, len(batch))
	for i, call := range batch {
		changes[i] = call.ch
	}
	for i, res := range c.a.changeFrom(ctx, changes, c.Known) {
		batch[i].done <- res
	}
}
