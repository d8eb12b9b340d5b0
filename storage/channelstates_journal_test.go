package storage

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// journaledStates is a saver whose batches go through a journal in root,
// run by the test (write), and the partition directory its states go in.
func journaledStates(t *testing.T, root string) (*ChannelStates, *Journal, string) {
	t.Helper()
	j, _ := openTestJournal(t, root)
	dir := filepath.Join(root, "topics", "t", "0")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := newChannelStates(root, nil)
	c.j = j
	return c, j, dir
}

// saveBatch saves channel's state confirmed at v and writes the batch.
func saveBatch(t *testing.T, c *ChannelStates, dir, channel string, v int64) {
	t.Helper()
	if err := c.Save(dir, channel, ChannelState{Confirmed: v}, nil); err != nil {
		t.Fatal(err)
	}
	if c.write() {
		t.Fatalf("the batch saving %d failed", v)
	}
}

// loseStateFiles empties a channel's state files, as a power loss takes
// what the kernel had not written back.
func loseStateFiles(t *testing.T, dir, channel string) {
	t.Helper()
	path, _ := channelStatePath(dir, channel)
	for slot := range 2 {
		if err := os.Truncate(slotPath(path, slot), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// With the journal, a batch's states are durable once the journal's sync
// ends: their files' own pages may be lost, and the replay writes back the
// newest state of each, the first one included.
func TestChannelStatesThroughTheJournalSurviveLostFiles(t *testing.T) {
	root := t.TempDir()
	c, _, dir := journaledStates(t, root)
	saveBatch(t, c, dir, "first", 7)
	for v := range int64(5) {
		saveBatch(t, c, dir, "moving", 10+v)
	}
	path, _ := channelStatePath(dir, "first")
	if tmps, _ := filepath.Glob(path + ".tmp*"); len(tmps) > 0 {
		t.Errorf("a first state through the journal left %v", tmps)
	}
	loseStateFiles(t, dir, "first")
	loseStateFiles(t, dir, "moving")
	if _, found := onDisk(t, dir, "moving"); found {
		t.Fatal("the emptied files still held a state")
	}
	_, rep := openTestJournal(t, root)
	if rep.Restored == 0 {
		t.Fatalf("replay %+v restored nothing", rep)
	}
	for channel, want := range map[string]int64{"first": 7, "moving": 14} {
		if st, found := onDisk(t, dir, channel); !found || st.Confirmed != want {
			t.Errorf("%s after the replay: %+v %v, want confirmed %d", channel, st, found, want)
		}
	}
}

// A state Flush writes as its partition closes is in the journal too.
func TestChannelStatesFlushThroughTheJournal(t *testing.T) {
	root := t.TempDir()
	c, _, dir := journaledStates(t, root)
	saveBatch(t, c, dir, "c", 1)
	if err := c.Save(dir, "c", ChannelState{Confirmed: 2}, nil); err != nil {
		t.Fatal(err)
	}
	c.Flush(dir)
	loseStateFiles(t, dir, "c")
	openTestJournal(t, root)
	if st, found := onDisk(t, dir, "c"); !found || st.Confirmed != 2 {
		t.Errorf("after the replay: %+v %v, want confirmed 2", st, found)
	}
}

// A removed state stays removed through a replay of the journal that
// recorded its writes.
func TestChannelStatesRemovalThroughTheJournal(t *testing.T) {
	root := t.TempDir()
	c, _, dir := journaledStates(t, root)
	saveBatch(t, c, dir, "gone", 3)
	saveBatch(t, c, dir, "gone", 4)
	if err := c.Remove(dir, "gone"); err != nil {
		t.Fatal(err)
	}
	if c.write() {
		t.Fatal("the removal failed")
	}
	openTestJournal(t, root)
	if st, found := onDisk(t, dir, "gone"); found {
		t.Errorf("a removed state came back with the replay: %+v", st)
	}
	path, _ := channelStatePath(dir, "gone")
	for slot := range 2 {
		if _, err := os.Stat(slotPath(path, slot)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("slot %d after the replay: %v", slot, err)
		}
	}
}

// While the journal has failed no state is written: one written beside
// it would be rolled back by the replay of an older one. The state stays
// pending, and its waiter hears of the failure once the saver closes.
func TestChannelStatesWriteNothingBesideAFailedJournal(t *testing.T) {
	root := t.TempDir()
	c, j, dir := journaledStates(t, root)
	saveBatch(t, c, dir, "c", 1)
	j.fail(errors.New("the disk went away"))
	var told error
	if err := c.Save(dir, "c", ChannelState{Confirmed: 2}, func(err error) { told = err }); err != nil {
		t.Fatal(err)
	}
	if !c.write() {
		t.Fatal("a batch beside a failed journal succeeded")
	}
	if st, _ := onDisk(t, dir, "c"); st.Confirmed != 1 {
		t.Errorf("on disk: %+v, want the state before the failure", st)
	}
	if st, _, _ := c.Load(dir, "c"); st.Confirmed != 2 {
		t.Errorf("loaded: %+v, want the pending state", st)
	}
	c.closed = true
	c.write()
	if told == nil {
		t.Error("the waiter was not told of the failure")
	}
}

// An empty state file is a first write a crash lost: no state, not a
// damaged one.
func TestChannelStateEmptyFileIsNone(t *testing.T) {
	dir := t.TempDir()
	path, _ := channelStatePath(dir, "c")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st, found, err := LoadChannelState(dir, "c")
	if err != nil || found {
		t.Errorf("an empty file: %+v %v %v, want no state and no error", st, found, err)
	}
}
