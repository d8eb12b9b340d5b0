package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// ChannelStates saves the states of a node's channels in batches, on a
// goroutine of its own. Saved one at a time (SaveChannelState), each state
// waits for the disk on the channel actor's turn. A failover that moves
// thousands of leaderships has each follower's channels save the offsets
// their new leaders report, and those fsyncs held every actor worker of
// the node while the new leaderships waited for one. A batch writes every
// state saved since the last, each over the channel's file that does not
// hold its newest durable state, and makes them durable with one syncfs.
// Consumers keep thousands of channels moving, each saved every
// --channel-persist-interval: a file made and renamed for each save cost
// a quarter of a node's processor time, an overwrite in place costs an
// open, a write and a close. A channel's first state is still a
// temporary file renamed into place after the syncfs, and a second
// syncfs makes the renames durable.
//
// With the node's journal, a batch records each state it writes there
// and makes them durable with the journal's sync instead: a syncfs also
// writes back every page the partitions dirtied, which the journal is
// there to leave to the kernel's pace. A state is then written in place
// even the first time; a crash before the journal's sync leaves at most
// an empty file, which counts as none, and the replay writes back what the
// sync covered. While the journal has failed no state is saved: a state
// written beside it would be rolled back by the replay of an older one.
//
// What is saved or removed and not yet written is what Load answers, so a
// channel started again, or the retention reading the channels' offsets,
// sees the newest state. A failed write stays pending and is tried again;
// a process that dies loses what its last batch had not written, as it
// lost whatever changed after its last periodic save before.
//
// A nil *ChannelStates saves, loads and removes at once, one file at a time.
type ChannelStates struct {
	fs     string   // a directory on the filesystem the states live on, for syncfs
	j      *Journal // nil without the node's journal
	logger *slog.Logger

	mu      sync.Mutex
	pending map[string]*pendingState // by file path
	// files is held while a file is written, renamed or removed: by the
	// batch, and by Flush, which writes a closing partition's states
	// itself. It guards slots.
	files sync.Mutex
	// slots is where each channel saved by this process has its newest
	// durable state, by the path of its first file.
	slots map[string]slotMark
	ver   uint64
	batch chan struct{} // closed when the batch under way, or the next, ends
	wake  chan struct{}
	retry time.Duration
	delay time.Duration // see NewChannelStates
	// oldest is when the first state pending now was queued, zero for
	// none; urgent, that an answer waits for one.
	oldest time.Time
	urgent bool
	closed bool
	// stopping: the node is stopping, and Close writes every state after
	// the partitions stopped; Flush does not wait for a batch each.
	stopping bool
	done     chan struct{} // closed when run returns
}

// pendingState is a state saved, or a removal, not yet written.
type pendingState struct {
	dir, channel string
	st           ChannelState
	removed      bool
	ver          uint64
	waiters      []stateWaiter
}

// stateWaiter is told once the state of version ver, or a later one, is
// durable, or failed.
type stateWaiter struct {
	ver uint64
	fn  func(error)
}

// NewChannelStates starts the saver for states under dir's filesystem.
// A state no one waits for waits up to delay for its batch, so that
// thousands of channels saving on their own clocks share one syncfs; one
// an answer waits for (Save's done, AfterSaved) starts a batch at once.
// j, if not nil, is the node's journal, which then makes the states
// durable: they must lie under its data directory, as partitions do.
func NewChannelStates(dir string, j *Journal, logger *slog.Logger, delay time.Duration) *ChannelStates {
	c := newChannelStates(dir, logger)
	c.j, c.delay = j, delay
	go c.run()
	return c
}

func newChannelStates(dir string, logger *slog.Logger) *ChannelStates {
	return &ChannelStates{
		fs:      dir,
		logger:  logger,
		pending: map[string]*pendingState{},
		slots:   map[string]slotMark{},
		batch:   make(chan struct{}),
		wake:    make(chan struct{}, 1),
		retry:   time.Second,
		done:    make(chan struct{}),
	}
}

// Save queues s as channel's state in partition directory dir; done, if
// not nil, is called once it is durable (nil) or its write failed, on the
// saver's goroutine.
func (c *ChannelStates) Save(dir, channel string, s ChannelState, done func(error)) error {
	if c == nil {
		err := SaveChannelState(dir, channel, s)
		if done != nil {
			done(err)
		}
		return err
	}
	if err := s.validate(); err != nil {
		return err
	}
	return c.queue(dir, channel, s, false, done)
}

// Remove deletes channel's state, saved or queued; none is not an error.
// Load answers none at once; the file goes with the next batch. A process
// that dies first leaves the file, and the channel, if made again, starts
// from the old state rather than at the end: it delivers more, never less.
func (c *ChannelStates) Remove(dir, channel string) error {
	if c == nil {
		return RemoveChannelState(dir, channel)
	}
	return c.queue(dir, channel, ChannelState{}, true, nil)
}

// Load reads channel's state: the newest queued, or the file's.
func (c *ChannelStates) Load(dir, channel string) (ChannelState, bool, error) {
	if c != nil {
		path, err := channelStatePath(dir, channel)
		if err != nil {
			return ChannelState{}, false, err
		}
		c.mu.Lock()
		p, ok := c.pending[path]
		c.mu.Unlock()
		if ok {
			return p.st, !p.removed, nil
		}
	}
	return LoadChannelState(dir, channel)
}

// Flush writes the states queued under dir itself, each with its own
// fsyncs, as a partition closes: its channels' states are on disk before
// its files move or go, and none is written later into a partition made
// again in its place. While the node is stopping (Stopping) it leaves
// them to Close.
func (c *ChannelStates) Flush(dir string) {
	if c == nil {
		return
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	c.files.Lock()
	defer c.files.Unlock()
	c.mu.Lock()
	if c.stopping || c.closed {
		c.mu.Unlock()
		return
	}
	claimed := make(map[string]*pendingState)
	for _, path := range c.under(prefix) {
		claimed[path] = c.pending[path]
		delete(c.pending, path)
	}
	c.mu.Unlock()
	for path, p := range claimed {
		var err error
		if p.removed {
			err = c.removeSlots(path)
		} else {
			err = c.saveNow(path, p.st)
		}
		if err != nil && c.logger != nil {
			c.logger.Error("saving channel state", "dir", p.dir, "channel", p.channel, "err", err)
		}
		for _, w := range p.waiters {
			w.fn(err)
		}
	}
	// The partition's files move or go now: a partition made again under
	// the same directory starts from what its files say.
	for path := range c.slots {
		if strings.HasPrefix(path, prefix) {
			delete(c.slots, path)
		}
	}
}

// saveNow makes st durable at path at once; c.files is held.
func (c *ChannelStates) saveNow(path string, st ChannelState) error {
	m, err := c.mark(path)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if c.j == nil {
		m, err = saveSlot(path, st, m)
	} else {
		m, err = c.saveJournaled(path, st, m)
	}
	if err == nil {
		c.slots[path] = m
	}
	return err
}

// saveJournaled makes st durable at path through the journal.
func (c *ChannelStates) saveJournaled(path string, st ChannelState, m slotMark) (slotMark, error) {
	slot, seq := m.next()
	if err := c.overwrite(slotPath(path, slot), st.marshalSlot(seq)); err != nil {
		return m, err
	}
	if err := c.j.Sync(); err != nil {
		return m, err
	}
	return slotMark{slot: slot, seq: seq, found: true}, nil
}

// overwrite writes rec over the slot file p, made if need be, and records
// it in the journal, if any: durable once the journal's next sync ends.
// The file is written before it is recorded, so a checkpoint's syncfs
// that begins after the record covers it.
func (c *ChannelStates) overwrite(p string, rec []byte) error {
	if c.j == nil {
		return writeSlotFile(p, rec, false)
	}
	if err := c.j.Err(); err != nil {
		return err
	}
	if err := writeSlotFile(p, rec, false); err != nil {
		return err
	}
	c.j.noteWrite(p, rec)
	return nil
}

// removeSlots removes the state at path, durably. The journal, if any,
// records the removal durably first: a replay must not bring back what
// it held.
func (c *ChannelStates) removeSlots(path string) error {
	if c.j != nil {
		if err := c.j.forget(slotPath(path, 0), slotPath(path, 1)); err != nil {
			return err
		}
	}
	return removeSlotsDurably(path)
}

// mark is where the state at path is durable, read from its files the
// first time; c.files is held. Damaged files count as none.
func (c *ChannelStates) mark(path string) (slotMark, error) {
	if m, ok := c.slots[path]; ok {
		return m, nil
	}
	_, m, err := readSlots(path)
	if err != nil && !errors.Is(err, ErrCorruptState) {
		return slotMark{}, err
	}
	c.slots[path] = m
	return m, nil
}

// AfterSaved calls fn once the state queued for channel, if any, is
// durable, and at once when none is.
func (c *ChannelStates) AfterSaved(dir, channel string, fn func(error)) {
	if c != nil {
		if path, err := channelStatePath(dir, channel); err == nil {
			c.mu.Lock()
			if p := c.pending[path]; p != nil {
				p.waiters = append(p.waiters, stateWaiter{p.ver, fn})
				c.urgent = true
				c.mu.Unlock()
				c.signal()
				return
			}
			c.mu.Unlock()
		}
	}
	fn(nil)
}

// List is the channels with a state under dir: the saved ones, and the
// queued ones, less those queued for removal.
func (c *ChannelStates) List(dir string) ([]string, error) {
	names, err := ListChannelStates(dir)
	if err != nil || c == nil {
		return names, err
	}
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	c.mu.Lock()
	queued := map[string]bool{}
	for _, path := range c.under(prefix) {
		if p := c.pending[path]; filepath.Clean(p.dir) == filepath.Clean(dir) {
			queued[p.channel] = !p.removed
		}
	}
	c.mu.Unlock()
	names = slices.DeleteFunc(names, func(n string) bool { has, ok := queued[n]; return ok && !has })
	for n, has := range queued {
		if has && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// under is the pending paths below prefix; c.mu is held.
func (c *ChannelStates) under(prefix string) []string {
	var paths []string
	for path := range c.pending {
		if strings.HasPrefix(path, prefix) {
			paths = append(paths, path)
		}
	}
	return paths
}

// Stopping tells the saver that the node is stopping: its partitions
// close without waiting for their channels' states, which Close writes
// in one batch once they have all stopped. Nothing is removed meanwhile.
func (c *ChannelStates) Stopping() {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
}

// Close writes what is queued and stops the saver; it returns the error
// of a state it could not write.
func (c *ChannelStates) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.signal()
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := len(c.pending); n > 0 {
		return fmt.Errorf("storage: %d channel states not written", n)
	}
	return nil
}

func (c *ChannelStates) queue(dir, channel string, s ChannelState, removed bool, done func(error)) error {
	path, err := channelStatePath(dir, channel)
	if err != nil {
		return err
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errors.New("storage: channel states closed")
	}
	c.ver++
	p := c.pending[path]
	if p == nil {
		p = &pendingState{dir: dir, channel: channel}
		c.pending[path] = p
	}
	if c.oldest.IsZero() {
		c.oldest = time.Now()
	}
	p.st, p.removed, p.ver = s, removed, c.ver
	if done != nil {
		p.waiters = append(p.waiters, stateWaiter{c.ver, done})
		c.urgent = true
	}
	c.mu.Unlock()
	c.signal()
	return nil
}

func (c *ChannelStates) signal() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *ChannelStates) run() {
	defer close(c.done)
	var retry, due <-chan time.Time
	for {
		select {
		case <-c.wake:
		case <-retry:
		case <-due:
		}
		if wait := c.untilDue(time.Now()); wait > 0 {
			// The oldest pending state is dated until the batch runs, so
			// a timer already set still falls due on time.
			if due == nil {
				due = time.After(wait)
			}
			continue
		}
		due = nil
		c.mu.Lock()
		closed := c.closed
		c.mu.Unlock()
		failed := c.write()
		retry = nil
		if failed {
			if closed {
				return
			}
			retry = time.After(c.retry)
		}
		if closed && !failed {
			c.mu.Lock()
			left := len(c.pending)
			c.mu.Unlock()
			if left == 0 {
				return
			}
		}
	}
}

// requeued dates what a batch left pending (failed, or saved again
// meanwhile) from its end, urgent if an answer waits for it.
func (c *ChannelStates) requeued() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) > 0 && c.oldest.IsZero() {
		c.oldest = time.Now()
	}
	for _, p := range c.pending {
		if len(p.waiters) > 0 {
			c.urgent = true
			break
		}
	}
}

// untilDue is how long the next batch may wait: until the oldest pending
// state has waited the delay; none while an answer waits or the node
// stops.
func (c *ChannelStates) untilDue(now time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.delay <= 0 || c.urgent || c.closed || c.stopping || c.oldest.IsZero() {
		return 0
	}
	return c.delay - now.Sub(c.oldest)
}

// written is one state of a batch: a removal, an overwrite in place, or a
// channel's first state in a temporary file to rename.
type written struct {
	path, tmp string
	p         pendingState
	wrote     bool     // the filesystem changed, to be synced
	placed    bool     // tmp was renamed into place
	next      slotMark // where the state is once durable
}

// write writes every pending state, and reports whether one failed.
func (c *ChannelStates) write() (failed bool) {
	c.mu.Lock()
	batch := make([]written, 0, len(c.pending))
	for path, p := range c.pending {
		batch = append(batch, written{path: path, p: *p})
	}
	ended := c.batch
	c.batch = make(chan struct{})
	// Saved during the batch, or left by it: the next batch's.
	c.oldest, c.urgent = time.Time{}, false
	c.mu.Unlock()
	defer close(ended)
	defer c.requeued()

	errs := make([]error, len(batch))
	wrote := 0
	for i := range batch {
		if c.put(&batch[i], &errs[i]) {
			wrote++
		}
	}
	if wrote > 0 {
		if err := c.sync(batch, errs); err != nil {
			for i := range batch {
				if batch[i].wrote && errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	placed := 0
	for i := range batch {
		if batch[i].tmp != "" && c.place(&batch[i], &errs[i]) {
			placed++
		}
	}
	var syncErr error
	if placed > 0 {
		syncErr = c.syncPlaced(batch, errs)
	}
	if syncErr == nil {
		c.marked(batch, errs)
	}
	return c.finish(batch, errs, syncErr)
}

// put writes one state of a batch, or removes it, unless it was dropped
// meanwhile (its partition closed); it reports whether the filesystem
// changed. A state saved again since is still written: only this
// goroutine and Flush change the files, under files, so the newer one
// follows in a later batch, and a channel saving faster than batches end
// still moves forward.
func (c *ChannelStates) put(w *written, err *error) bool {
	c.files.Lock()
	defer c.files.Unlock()
	if c.dropped(w.path) {
		return false
	}
	if w.p.removed {
		delete(c.slots, w.path)
		*err = c.removeSlots(w.path)
		w.wrote = *err == nil
		return w.wrote
	}
	m, e := c.mark(w.path)
	if e != nil {
		*err = e
		return false
	}
	if m.found {
		slot, seq := m.next()
		e := c.overwrite(slotPath(w.path, slot), w.p.st.marshalSlot(seq))
		if !errors.Is(e, os.ErrNotExist) {
			*err, w.next, w.wrote = e, slotMark{slot: slot, seq: seq, found: true}, e == nil
			return w.wrote
		}
		// The channel's directory went: start over, as for a first state.
		delete(c.slots, w.path)
		m = slotMark{}
	}
	slot, seq := m.next()
	rec := w.p.st.marshalSlot(seq)
	if c.j == nil {
		w.tmp, *err = writeStateFile(w.path, rec)
	} else if *err = channelDir(w.path); *err == nil {
		// Straight into its file, for the journal to make durable.
		*err = c.overwrite(slotPath(w.path, slot), rec)
	}
	w.next, w.wrote = slotMark{slot: slot, seq: seq, found: true}, *err == nil
	return w.wrote
}

// dropped says whether the state at path left pending while its batch
// wrote it: Flush took it, its partition closing.
func (c *ChannelStates) dropped(path string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pending[path] == nil
}

// place renames a channel's first state into place, unless it failed or
// was dropped meanwhile; it reports whether the filesystem changed.
func (c *ChannelStates) place(w *written, err *error) bool {
	c.files.Lock()
	defer c.files.Unlock()
	if c.dropped(w.path) || *err != nil {
		os.Remove(w.tmp)
		return false
	}
	if e := os.Rename(w.tmp, w.path); e != nil {
		os.Remove(w.tmp)
		*err = e
		return false
	}
	w.placed = true
	return true
}

// marked notes where the batch's states are durable now. A state Flush
// took meanwhile is its to note: its partition may be gone.
func (c *ChannelStates) marked(batch []written, errs []error) {
	c.files.Lock()
	defer c.files.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, w := range batch {
		if errs[i] == nil && w.next.found && (w.tmp == "" || w.placed) && c.pending[w.path] != nil {
			c.slots[w.path] = w.next
		}
	}
}

// finish drops what is durable from pending and tells the waiters of the
// versions written; what failed stays for the next batch.
func (c *ChannelStates) finish(batch []written, errs []error, syncErr error) (failed bool) {
	type told struct {
		fns []func(error)
		err error
	}
	var tell []told
	c.mu.Lock()
	for i, w := range batch {
		err := errs[i]
		if err == nil {
			err = syncErr
		}
		cur := c.pending[w.path]
		if cur == nil {
			continue // dropped by Flush, which told its waiters
		}
		switch {
		case errors.Is(err, errPartitionGone):
			delete(c.pending, w.path) // nothing left to save it in
			tell = append(tell, told{waiterFns(cur.waiters), err})
			continue
		case err != nil:
			failed = true
			if c.logger != nil {
				c.logger.Error("saving channel state", "dir", w.p.dir, "channel", w.p.channel, "err", err)
			}
			if c.closed {
				tell = append(tell, told{waiterFns(cur.waiters), err})
				cur.waiters = nil
			}
			continue
		}
		var done []stateWaiter
		done, cur.waiters = splitWaiters(cur.waiters, w.p.ver)
		tell = append(tell, told{waiterFns(done), nil})
		if cur.ver == w.p.ver {
			delete(c.pending, w.path)
		}
	}
	c.mu.Unlock()
	for _, t := range tell {
		for _, fn := range t.fns {
			fn(t.err)
		}
	}
	return failed
}

// splitWaiters parts ws into those of version ver or before, and the rest.
func splitWaiters(ws []stateWaiter, ver uint64) (done, left []stateWaiter) {
	for _, w := range ws {
		if w.ver <= ver {
			done = append(done, w)
		} else {
			left = append(left, w)
		}
	}
	return done, left
}

func waiterFns(ws []stateWaiter) []func(error) {
	fns := make([]func(error), len(ws))
	for i, w := range ws {
		fns[i] = w.fn
	}
	return fns
}

// sync makes what the batch wrote durable: the journal's sync, one
// syncfs, or where there is none, an fsync of each file written and of
// its directory.
func (c *ChannelStates) sync(batch []written, errs []error) error {
	if c.j != nil {
		return c.j.Sync()
	}
	err := c.syncfs()
	if !errors.Is(err, errNoSyncfs) {
		return err
	}
	for i, w := range batch {
		if !w.wrote || errs[i] != nil {
			continue
		}
		file := w.tmp
		if file == "" && !w.p.removed {
			file = slotPath(w.path, w.next.slot)
		}
		if file != "" {
			errs[i] = syncFile(file)
		}
		if errs[i] == nil {
			errs[i] = syncDir(filepath.Dir(w.path))
		}
	}
	return nil
}

// syncPlaced makes the batch's renames and removals durable: one syncfs,
// or where there is none, an fsync of each directory they changed.
func (c *ChannelStates) syncPlaced(batch []written, errs []error) error {
	err := c.syncfs()
	if !errors.Is(err, errNoSyncfs) {
		return err
	}
	dirs := map[string]bool{}
	for i := range batch {
		if errs[i] == nil {
			dirs[filepath.Dir(batch[i].path)] = true
		}
	}
	for dir := range dirs {
		if err := syncDir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func (c *ChannelStates) syncfs() error {
	f, err := os.Open(c.fs)
	if err != nil {
		return err
	}
	defer f.Close()
	return syncfs(f)
}

// channelDir makes the directory of the state file path, only inside a
// partition directory that exists.
func channelDir(path string) error {
	err := os.Mkdir(filepath.Dir(path), 0o755)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return errPartitionGone
	case err != nil && !errors.Is(err, os.ErrExist):
		return err
	}
	return nil
}

var errPartitionGone = errors.New("storage: channel state's partition directory is gone")

// writeStateFile writes rec beside path, not synced, and returns the
// file's name. The channel's directory is made only inside a partition
// directory that exists: a state queued for a partition removed since is
// not written into a directory made again.
func writeStateFile(path string, rec []byte) (string, error) {
	if err := channelDir(path); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return "", err
	}
	_, err = tmp.Write(rec)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	return tmp.Name(), nil
}
