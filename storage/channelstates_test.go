package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// onDisk reads a channel's state from its file, past any queue.
func onDisk(t *testing.T, dir, channel string) (ChannelState, bool) {
	t.Helper()
	st, found, err := LoadChannelState(dir, channel)
	if err != nil {
		t.Fatal(err)
	}
	return st, found
}

// A saved state is what Load answers at once; a batch writes it, and the
// last of several saves of one channel is the one on disk.
func TestChannelStatesBatchTheLatestOfEachChannel(t *testing.T) {
	dir := t.TempDir()
	c := newChannelStates(dir, nil)
	for i := range 100 {
		for v := range 3 {
			if err := c.Save(dir, fmt.Sprintf("ch%d", i), ChannelState{Confirmed: int64(100*v + i)}, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st, found, err := c.Load(dir, "ch7"); err != nil || !found || st.Confirmed != 207 {
		t.Fatalf("queued state: %+v %v %v, want confirmed 207", st, found, err)
	}
	if _, found := onDisk(t, dir, "ch7"); found {
		t.Fatal("a state was written before its batch")
	}
	if c.write() {
		t.Fatal("the batch failed")
	}
	for i := range 100 {
		if st, found := onDisk(t, dir, fmt.Sprintf("ch%d", i)); !found || st.Confirmed != int64(200+i) {
			t.Errorf("ch%d on disk: %+v %v, want confirmed %d", i, st, found, 200+i)
		}
	}
	if n := len(c.pending); n != 0 {
		t.Errorf("%d states still pending after their batch", n)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, channelsDir, "*.tmp*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
}

// A removal is what Load answers at once, goes with the next batch, and a
// save after it brings the channel back.
func TestChannelStatesRemoveThenSaveAgain(t *testing.T) {
	dir := t.TempDir()
	c := newChannelStates(dir, nil)
	if err := SaveChannelState(dir, "gone", ChannelState{Confirmed: 5}); err != nil {
		t.Fatal(err)
	}
	if err := SaveChannelState(dir, "back", ChannelState{Confirmed: 5}); err != nil {
		t.Fatal(err)
	}
	c.Remove(dir, "gone")
	c.Remove(dir, "back")
	c.Save(dir, "back", ChannelState{Confirmed: 9}, nil)
	if _, found, _ := c.Load(dir, "gone"); found {
		t.Error("a removed state is still loaded")
	}
	c.write()
	if _, found := onDisk(t, dir, "gone"); found {
		t.Error("the removed state is still on disk")
	}
	if st, found := onDisk(t, dir, "back"); !found || st.Confirmed != 9 {
		t.Errorf("saved after its removal: %+v %v, want confirmed 9", st, found)
	}
}

// A state saved again while its batch writes the older one: the older is
// placed and its waiter told, the newer stays queued for the next batch,
// so a channel saving faster than batches end still moves forward.
func TestChannelStatesSavedDuringItsBatch(t *testing.T) {
	dir := t.TempDir()
	c := newChannelStates(dir, nil)
	var first, second int
	c.Save(dir, "c", ChannelState{Confirmed: 1}, func(err error) {
		if err != nil {
			t.Error(err)
		}
		first++
	})
	path, _ := channelStatePath(dir, "c")
	w := written{path: path, p: *c.pending[path]}
	c.Save(dir, "c", ChannelState{Confirmed: 2}, func(error) { second++ })
	var errs [1]error
	if !c.put(&w, &errs[0]) || !c.place(&w, &errs[0]) {
		t.Fatalf("the older state was not written and placed: %v", errs[0])
	}
	c.marked([]written{w}, errs[:])
	c.finish([]written{w}, errs[:], nil)
	if first != 1 || second != 0 {
		t.Errorf("after the older write: waiters told %d and %d times, want 1 and 0", first, second)
	}
	if st, _ := onDisk(t, dir, "c"); st.Confirmed != 1 {
		t.Errorf("on disk %+v, want the older state", st)
	}
	if st, found, _ := c.Load(dir, "c"); !found || st.Confirmed != 2 {
		t.Errorf("loaded %+v %v, want the newer state", st, found)
	}
	c.write()
	if st, _ := onDisk(t, dir, "c"); st.Confirmed != 2 {
		t.Errorf("on disk %+v, want the newer state", st)
	}
	if first != 1 || second != 1 {
		t.Errorf("after the newer write: waiters told %d and %d times, want once each", first, second)
	}
}

// AfterSaved waits for the state queued, and answers at once when none is.
func TestChannelStatesAfterSaved(t *testing.T) {
	dir := t.TempDir()
	c := newChannelStates(dir, nil)
	now := false
	c.AfterSaved(dir, "c", func(error) { now = true })
	if !now {
		t.Error("nothing queued, yet AfterSaved waited")
	}
	c.Save(dir, "c", ChannelState{Confirmed: 3}, nil)
	later := false
	c.AfterSaved(dir, "c", func(error) { later = true })
	if later {
		t.Error("AfterSaved answered before the queued state was written")
	}
	c.write()
	if !later {
		t.Error("AfterSaved never answered")
	}
}

// Flush writes a closing partition's queued states and removals itself,
// and List names the queued ones and not the removed.
func TestChannelStatesFlushAndList(t *testing.T) {
	root := t.TempDir()
	dir, other := filepath.Join(root, "a-0"), filepath.Join(root, "a-1")
	if err := SaveChannelState(dir, "old", ChannelState{}); err != nil {
		t.Fatal(err)
	}
	c := newChannelStates(root, nil)
	c.Save(dir, "new", ChannelState{Confirmed: 6}, nil)
	c.Remove(dir, "old")
	c.Save(other, "x", ChannelState{Confirmed: 1}, nil)
	if names, err := c.List(dir); err != nil || !slices.Equal(names, []string{"new"}) {
		t.Errorf("List: %v %v, want the queued channel only", names, err)
	}
	c.Flush(dir)
	if st, found := onDisk(t, dir, "new"); !found || st.Confirmed != 6 {
		t.Errorf("after Flush: %+v %v", st, found)
	}
	if _, found := onDisk(t, dir, "old"); found {
		t.Error("the removal queued was not carried out by Flush")
	}
	if _, found := onDisk(t, other, "x"); found {
		t.Error("Flush wrote another partition's state")
	}
	if len(c.pending) != 1 {
		t.Errorf("%d states pending after Flush, want the other partition's", len(c.pending))
	}
}

// A partition removed with states queued has them dropped: its directory
// is not made again to hold them.
func TestChannelStatesOfARemovedPartitionAreDropped(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "topic-0")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := newChannelStates(root, nil)
	var got error
	c.Save(dir, "c", ChannelState{Confirmed: 3}, func(err error) { got = err })
	os.RemoveAll(dir)
	if c.write() {
		t.Error("a state with nowhere to go counted as a failed write, to be tried again")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the removed partition's directory is back: %v", err)
	}
	if !errors.Is(got, errPartitionGone) {
		t.Errorf("the waiter was told %v", got)
	}
	if len(c.pending) != 0 {
		t.Error("the dropped state is still pending")
	}
}

// A failed write stays pending, Load still answers it, and Close reports
// it; Flush of its partition drops it.
func TestChannelStatesFailedWriteStaysPending(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "p")
	os.MkdirAll(filepath.Join(dir, channelsDir), 0o755)
	// A directory where the state's file would go makes its rename fail.
	path, _ := channelStatePath(dir, "c")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := NewChannelStates(root, nil, nil, 0)
	c.retry = 0
	if err := c.Save(dir, "c", ChannelState{Confirmed: 4}, nil); err != nil {
		t.Fatal(err)
	}
	c.Flush(dir)
	if _, found, _ := c.Load(dir, "c"); found {
		t.Error("a state its partition's Flush could not write is still loaded")
	}
	if err := c.Save(dir, "c", ChannelState{Confirmed: 5}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err == nil {
		t.Error("Close reported nothing of a state it could not write")
	}
}

// Close writes what is queued, and takes no save after it.
func TestChannelStatesClose(t *testing.T) {
	dir := t.TempDir()
	c := NewChannelStates(dir, nil, nil, 0)
	c.Save(dir, "later", ChannelState{Confirmed: 9}, nil)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if st, found := onDisk(t, dir, "later"); !found || st.Confirmed != 9 {
		t.Errorf("after Close: %+v %v on disk", st, found)
	}
	if err := c.Save(dir, "late", ChannelState{}, nil); err == nil {
		t.Error("a save after Close was taken")
	}
}

// Saving 1,000 channels' states, as a failover has a node's follower
// channels save the offsets their new leaders report: one at a time with
// their own fsyncs, and queued to the node's batches.
//
//	go test -run '^$' -bench ChannelStateSaves -benchtime=3x ./storage/
func BenchmarkChannelStateSaves(b *testing.B) {
	const channels = 1000
	dir := b.TempDir()
	b.Run("one at a time", func(b *testing.B) {
		for b.Loop() {
			for i := range channels {
				if err := SaveChannelState(dir, fmt.Sprintf("ch%d", i), ChannelState{Confirmed: int64(i)}); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("batched", func(b *testing.B) {
		c := NewChannelStates(dir, nil, nil, 0)
		defer c.Close()
		for b.Loop() {
			done := make(chan error, channels)
			for i := range channels {
				if err := c.Save(dir, fmt.Sprintf("ch%d", i), ChannelState{Confirmed: int64(i + 1)}, func(err error) { done <- err }); err != nil {
					b.Fatal(err)
				}
			}
			for range channels {
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

// After a channel's first state, batches overwrite its two files in turn,
// with no temporary file; a channel whose directory went meanwhile starts
// over with a first state.
func TestChannelStatesOverwriteInPlace(t *testing.T) {
	dir := t.TempDir()
	c := newChannelStates(dir, nil)
	files := func() []string {
		names, _ := filepath.Glob(filepath.Join(dir, channelsDir, "*"))
		for i := range names {
			names[i] = filepath.Base(names[i])
		}
		return names
	}
	// saveInBatch saves c's state confirmed at v and writes the batch.
	saveInBatch := func(v int64) {
		t.Helper()
		if err := c.Save(dir, "c", ChannelState{Confirmed: v}, nil); err != nil {
			t.Fatal(err)
		}
		if c.write() {
			t.Fatalf("the batch of %d failed", v)
		}
		if st, found := onDisk(t, dir, "c"); !found || st.Confirmed != v {
			t.Fatalf("after the batch of %d: %+v %v on disk", v, st, found)
		}
	}
	for v := int64(1); v <= 3; v++ {
		saveInBatch(v)
		want := []string{"c.state", "c.state.1"}[:min(v, 2)]
		if got := files(); !slices.Equal(got, want) {
			t.Fatalf("after batch %d: files %v, want %v", v, got, want)
		}
	}
	if m := c.slots[filepath.Join(dir, channelsDir, "c.state")]; m.slot != 0 || m.seq != 3 {
		t.Fatalf("mark %+v, want the first file at seq 3", m)
	}
	if err := os.RemoveAll(filepath.Join(dir, channelsDir)); err != nil {
		t.Fatal(err)
	}
	saveInBatch(9) // after the channel's directory went
}

// A state no one waits for waits up to the delay for its batch, dated
// from the oldest pending; an answer waiting, or the node stopping, starts
// the batch at once, and it takes every pending state.
func TestChannelStatesBatchWaitsUnlessAnAnswerDoes(t *testing.T) {
	dir := t.TempDir()
	c := newChannelStates(dir, nil)
	c.delay = time.Second
	t0 := time.Now()
	if d := c.untilDue(t0); d != 0 {
		t.Fatalf("nothing pending: wait %v, want none", d)
	}
	c.Save(dir, "a", ChannelState{Confirmed: 1}, nil)
	c.mu.Lock()
	queued := c.oldest
	c.mu.Unlock()
	c.Save(dir, "b", ChannelState{Confirmed: 2}, nil)
	if d := c.untilDue(queued.Add(300 * time.Millisecond)); d != 700*time.Millisecond {
		t.Fatalf("300 ms after the first save: wait %v, want 700ms", d)
	}
	if d := c.untilDue(queued.Add(time.Second)); d > 0 {
		t.Fatalf("a delay after the first save: wait %v, want none", d)
	}
	c.AfterSaved(dir, "a", func(error) {})
	if d := c.untilDue(queued); d != 0 {
		t.Fatalf("an answer waiting: wait %v, want none", d)
	}
	if c.write() {
		t.Fatal("the batch failed")
	}
	c.Save(dir, "a", ChannelState{Confirmed: 3}, nil)
	if d := c.untilDue(time.Now()); d <= 0 {
		t.Fatalf("after the batch, a new save without an answer: wait %v, want some", d)
	}
	c.Stopping()
	if d := c.untilDue(time.Now()); d != 0 {
		t.Fatalf("stopping: wait %v, want none", d)
	}

	// The saver itself: a state with a waiter brings the one without.
	dir2 := t.TempDir()
	s := NewChannelStates(dir2, nil, nil, time.Hour)
	t.Cleanup(func() { s.Close() })
	s.Save(dir2, "quiet", ChannelState{Confirmed: 5}, nil)
	done := make(chan error, 1)
	s.Save(dir2, "asked", ChannelState{Confirmed: 6}, func(err error) { done <- err })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a state an answer waits for was not written")
	}
	if st, found := onDisk(t, dir2, "quiet"); !found || st.Confirmed != 5 {
		t.Fatalf("the state no one waited for: %+v %v on disk, want it in the same batch", st, found)
	}
}
