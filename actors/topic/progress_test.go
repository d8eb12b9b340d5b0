package topic

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/partitamq/partita/storage"
)

// The scripts in testdata/progress drive three partition cores (a leader's
// Writer and Tracker, two followers' Follower cores), each over an in-memory
// log, with a manual clock. Nothing moves unless a command says so: writes
// wait on the wire until delivered and acks until received, so each script
// fixes one interleaving and prints what every step sent and decided. The
// glue between the cores does what the partition actor's shell does with
// their decisions, without actors, streams or disks.
//
// Commands:
//
//	history nodes=(n1,n2) records=3 epoch=1   records every listed node holds
//	start isr=(n2) catchup=(n3) epoch=2 [chunk=N] [hear=(n2,n3)] [deposed=(n2)] [probe-every=1s]
//	publish [n=1]                             publishes, one record each
//	deliver node=n3 [n=K]                     the follower applies K writes
//	recv node=n3 [n=K]                        the leader takes K acks
//	stabilize                                 deliver and recv until quiet
//	lose node=n3 [n=K]                        K writes vanish on the wire
//	down node=n3 / up node=n3                 the stream breaks / connects
//	hear node=n3                              the follower learns the role
//	shrunk ok|fail                            the metadata answers a shrink
//	join ok|fail                              the metadata answers a join
//	tick advance=20ms                         time passes; due work runs
//	retain records=K                          n1 keeps data from record K on
//	state                                     followers and logs
func TestProgress(t *testing.T) {
	datadriven.Walk(t, "testdata/progress", func(t *testing.T, path string) {
		h := newProgressHarness()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return h.run(t, d)
		})
	})
}

// memLog is a partition's log in memory: committed records, and the data
// of every message appended, committed or not, from base on.
type memLog struct {
	recs []storage.CommitRecord
	data []byte
	base int64
}

func (l *memLog) Count() int64 { return int64(len(l.recs)) }

func (l *memLog) Record(i int64) (storage.CommitRecord, error) {
	if i < 0 || i >= int64(len(l.recs)) {
		return storage.CommitRecord{}, fmt.Errorf("record %d out of range", i)
	}
	return l.recs[i], nil
}

func (l *memLog) Start() int64 { return l.base }

func (l *memLog) ReadAt(p []byte, off int64) (int, error) {
	if off < l.base || off+int64(len(p)) > l.end() {
		return 0, errors.New("read outside the log")
	}
	return copy(p, l.data[off-l.base:]), nil
}

func (l *memLog) end() int64 { return l.base + int64(len(l.data)) }

func (l *memLog) committedEnd() int64 {
	if len(l.recs) == 0 {
		return l.base
	}
	return l.recs[len(l.recs)-1].End()
}

func (l *memLog) appendData(data []byte, off int64) error {
	if off != l.end() {
		return ErrOffsetMismatch
	}
	l.data = append(l.data, data...)
	return nil
}

func (l *memLog) truncateData(end int64) { l.data = l.data[:max(end-l.base, 0)] }

func (l *memLog) position() Position {
	pos := Position{NextID: FirstID(0), End: l.committedEnd()}
	if n := len(l.recs); n > 0 {
		last := l.recs[n-1]
		pos.NextID, pos.Last, pos.Count = uint64(last.LastMsgLogID)+1, Ref(last), last.LastCount()
	}
	return pos
}

func (l *memLog) lookup(id int64) (storage.CommitRecord, int64, bool) { return findByLogID(l, id) }

func (l *memLog) String() string {
	refs := make([]RecordRef, len(l.recs))
	for i, r := range l.recs {
		refs[i] = Ref(r)
	}
	s := refsString(refs)
	if l.base > 0 {
		s = fmt.Sprintf("from %d %s", l.base, s)
	}
	return s
}

// refsString shows records as LogID/epoch.
func refsString(refs []RecordRef) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = fmt.Sprintf("%d/%d", r.LogID, r.Epoch)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// wire is a write on its way to a follower.
type wire struct {
	epoch    int64
	rec      storage.CommitRecord
	prev     RecordRef
	data     []byte
	fullSync bool
}

// ackMsg is a follower's answer on its way to the leader.
type ackMsg struct {
	logID  int64
	epoch  int64 // the epoch the follower is in
	kind   ErrorKind
	err    *Error
	behind bool
	sample []RecordRef
}

type progressNode struct {
	name     string
	log      *memLog
	follower *Follower // nil on the leader
	// deposedIn: the node led in this epoch and has not heard that it no
	// longer does, so it has no follower core yet (0: it did not lead).
	deposedIn int64
	toNode    []wire   // the leader's stream to this follower
	toLeader  []ackMsg // its acks back
	down      bool
}

type progressHarness struct {
	now     time.Time
	start   time.Time
	nodes   map[string]*progressNode
	leader  *progressNode
	writer  *Writer
	tracker *Tracker
	role    Role
	chunk   int
	asked   string // the follower the metadata was asked to add
	out     *strings.Builder
}

func newProgressHarness() *progressHarness {
	start := time.Unix(1_700_000_000, 0).UTC()
	h := &progressHarness{now: start, start: start, nodes: map[string]*progressNode{}}
	for _, n := range []string{"n1", "n2", "n3"} {
		h.nodes[n] = &progressNode{name: n, log: &memLog{}}
	}
	h.leader = h.nodes["n1"]
	h.follow(h.nodes["n2"], 0)
	h.follow(h.nodes["n3"], 0)
	return h
}

func (h *progressHarness) printf(format string, args ...any) {
	fmt.Fprintf(h.out, format+"\n", args...)
}

func (h *progressHarness) run(t *testing.T, d *datadriven.TestData) string {
	h.out = &strings.Builder{}
	switch d.Cmd {
	case "history":
		var records int
		var epoch int64
		nodes := listArg(d, "nodes")
		d.ScanArgs(t, "records", &records)
		d.ScanArgs(t, "epoch", &epoch)
		for _, n := range nodes {
			node := h.nodes[n]
			h.history(t, node.log, records, epoch)
			if node != h.leader {
				h.follow(node, epoch)
			}
		}
	case "start":
		h.startLeader(t, d)
	case "publish":
		n := 1
		if d.HasArg("n") {
			d.ScanArgs(t, "n", &n)
		}
		for range n {
			if r := h.writer.Offer(Publish{Bodies: [][]byte{[]byte("m")}, Token: "pub", ReceivedAt: h.now}); r != nil {
				h.printf("publish refused: %s", r.Err.Text)
			}
		}
		h.flush()
	case "deliver":
		node, n := h.nodeArg(t, d), h.countArg(t, d)
		for i := 0; i < n && len(node.toNode) > 0; i++ {
			w := node.toNode[0]
			node.toNode = node.toNode[1:]
			h.apply(node, w)
		}
	case "recv":
		node, n := h.nodeArg(t, d), h.countArg(t, d)
		for i := 0; i < n && len(node.toLeader) > 0; i++ {
			a := node.toLeader[0]
			node.toLeader = node.toLeader[1:]
			h.acked(node.name, a)
		}
	case "stabilize":
		for moved := true; moved; {
			moved = false
			for _, n := range []string{"n2", "n3"} {
				node := h.nodes[n]
				for len(node.toNode) > 0 {
					w := node.toNode[0]
					node.toNode = node.toNode[1:]
					h.apply(node, w)
					moved = true
				}
				for len(node.toLeader) > 0 {
					a := node.toLeader[0]
					node.toLeader = node.toLeader[1:]
					h.acked(n, a)
					moved = true
				}
			}
		}
	case "lose":
		node, n := h.nodeArg(t, d), h.countArg(t, d)
		n = min(n, len(node.toNode))
		for _, w := range node.toNode[:n] {
			h.printf("lost n1->%s write %d", node.name, w.rec.LogID)
		}
		node.toNode = node.toNode[n:]
	case "down":
		node := h.nodeArg(t, d)
		node.down = true
		if k := len(node.toNode) + len(node.toLeader); k > 0 {
			h.printf("stream to %s dropped %d writes and %d acks", node.name, len(node.toNode), len(node.toLeader))
		}
		node.toNode, node.toLeader = nil, nil
		h.tracker.Down(node.name, h.now)
		h.perform(h.writer.FollowerDown(node.name))
	case "up":
		node := h.nodeArg(t, d)
		node.down = false
		if h.tracker.Up(node.name) {
			h.probe(node.name)
		}
	case "shrunk":
		h.shrunk(d.CmdArgs[0].Key == "ok")
	case "hear":
		h.hear(h.nodeArg(t, d))
	case "join":
		h.joinAnswered(d.CmdArgs[0].Key == "ok")
	case "tick":
		var s string
		d.ScanArgs(t, "advance", &s)
		adv, err := time.ParseDuration(s)
		if err != nil {
			d.Fatalf(t, "advance: %v", err)
		}
		h.now = h.now.Add(adv)
		if due := h.nextDeadline(); !due.IsZero() && !h.now.Before(due) {
			h.printf("wake at +%s", h.now.Sub(h.start))
			h.wake()
		}
	case "retain":
		// Retention deleted the data of the first records.
		var records int
		d.ScanArgs(t, "records", &records)
		l := h.leader.log
		base := l.recs[records].MsgOffset
		l.data, l.base = l.data[base-l.base:], base
	case "state":
		for _, n := range []string{"n1", "n2", "n3"} {
			h.printf("%s log %s", n, h.nodes[n].log)
		}
	default:
		d.Fatalf(t, "unknown command %s", d.Cmd)
	}
	if h.tracker != nil {
		h.printState()
	}
	return h.out.String()
}

func (h *progressHarness) nodeArg(t *testing.T, d *datadriven.TestData) *progressNode {
	var n string
	d.ScanArgs(t, "node", &n)
	node, ok := h.nodes[n]
	if !ok || node == h.leader {
		d.Fatalf(t, "no follower %s", n)
	}
	return node
}

// listArg is the values of key=(a,b), none when key is missing.
func listArg(d *datadriven.TestData, key string) []string {
	for _, a := range d.CmdArgs {
		if a.Key == key {
			var out []string
			for _, v := range a.Vals {
				if v != "" {
					out = append(out, v)
				}
			}
			return out
		}
	}
	return nil
}

func (h *progressHarness) countArg(t *testing.T, d *datadriven.TestData) int {
	n := 1 << 30
	if d.HasArg("n") {
		d.ScanArgs(t, "n", &n)
	}
	return n
}

// printState shows each follower's state and, when something is due, when.
func (h *progressHarness) printState() {
	for _, n := range []string{"n2", "n3"} {
		p, ok := h.tracker.prs[n]
		if !ok {
			continue
		}
		st := h.tracker.State(n)
		line := fmt.Sprintf("%s: %s", n, st)
		if st != StateInSync && p.Match != 0 {
			line += fmt.Sprintf(" match=%d", p.Match)
		}
		if p.From >= 0 {
			line += fmt.Sprintf(" from=%d", p.From)
		}
		if p.push != nil {
			line += fmt.Sprintf(" next=%d awaited=%d", p.Next(), p.push.awaited)
		}
		if !p.ResendAt.IsZero() {
			line += fmt.Sprintf(" resend-at=+%s", p.ResendAt.Sub(h.start))
		}
		if h.tracker.probeDue(p) {
			line += fmt.Sprintf(" probe-at=+%s", p.ProbeAt.Sub(h.start))
		}
		h.printf("%s", line)
	}
	var flags []string
	if h.writer.Held() {
		flags = append(flags, "held")
	}
	if !h.writer.Writable() {
		flags = append(flags, "disabled")
	}
	if due := h.nextDeadline(); !due.IsZero() {
		flags = append(flags, fmt.Sprintf("due=+%s", due.Sub(h.start)))
	}
	line := fmt.Sprintf("n1: epoch=%d isr=%v in-flight=%d committed=%d", h.writer.Epoch(), h.writer.Followers(), h.writer.InFlight(), h.leader.log.Count())
	if h.writer.Waiting() > 0 {
		line += fmt.Sprintf(" waiting=%d", h.writer.Waiting())
	}
	h.printf("%s", strings.Join(append([]string{line}, flags...), " "))
}

// history appends records to a log as a leader in epoch would, one message
// each, with the same bytes on every node.
func (h *progressHarness) history(t *testing.T, l *memLog, records int, epoch int64) {
	w := NewWriter(WriterConfig{Epoch: epoch, Replicas: 1, MaxBatchMessages: 1}, l.position())
	for range records {
		w.Offer(Publish{Bodies: [][]byte{[]byte("h")}})
		wr := w.NextWrite(h.start)
		if err := l.appendData(wr.Data, wr.Record.MsgOffset); err != nil {
			t.Fatal(err)
		}
		w.LocalWritten(wr.Record.LogID, nil)
		l.recs = append(l.recs, wr.Record)
	}
}

// startLeader makes n1 the leader of a role, as applyRole does on a node
// that did not lead; followers named by hear learn the role too.
func (h *progressHarness) startLeader(t *testing.T, d *datadriven.TestData) {
	var epoch int64
	isr, catchup := listArg(d, "isr"), listArg(d, "catchup")
	d.ScanArgs(t, "epoch", &epoch)
	h.chunk = catchupChunkRecords
	if d.HasArg("chunk") {
		d.ScanArgs(t, "chunk", &h.chunk)
	}
	hear := listArg(d, "hear")
	if !d.HasArg("hear") {
		hear = append(append(hear, isr...), catchup...)
	}
	h.role = Role{Leader: "n1", ISR: append([]string{"n1"}, isr...), Catchup: catchup, EpochForWrite: epoch, Replicas: 3}
	var probeEvery time.Duration
	if d.HasArg("probe-every") {
		var s string
		d.ScanArgs(t, "probe-every", &s)
		var err error
		if probeEvery, err = time.ParseDuration(s); err != nil {
			d.Fatalf(t, "probe-every: %v", err)
		}
	}
	h.tracker = NewTracker(joinWait(200*time.Millisecond), probeEvery, true)
	h.tracker.SetRole(isr, catchup)
	h.tracker.Lead()
	h.writer = NewWriter(WriterConfig{Epoch: epoch, Followers: isr, Replicas: 3, Window: 4, MaxBatchMessages: 1, ShrinkAfter: 200 * time.Millisecond, WriteTimeout: time.Second}, h.leader.log.position())
	// A deposed leader not told yet: it answers as the partition actor of
	// a leader does (apply.go).
	for _, n := range listArg(d, "deposed") {
		node := h.nodes[n]
		node.deposedIn, node.follower = node.follower.Epoch(), nil
	}
	for _, n := range hear {
		h.hear(h.nodes[n])
	}
	for _, n := range catchup {
		h.probe(n)
	}
}

// hear gives a follower the current role, as a metadata watch does.
func (h *progressHarness) hear(node *progressNode) {
	h.follow(node, h.role.EpochForWrite)
	node.follower.SetISR(h.role.inISR(node.name) || h.role.catchingUp(node.name))
	h.printf("%s hears epoch %d", node.name, h.role.EpochForWrite)
}

// follow makes node a follower in epoch at the end of its log.
func (h *progressHarness) follow(node *progressNode, epoch int64) {
	node.follower, node.deposedIn = NewFollower(epoch, node.log.position(), node.log.lookup), 0
}

func (h *progressHarness) send(node string, epoch int64, rec storage.CommitRecord, prev RecordRef, data []byte, fullSync bool) {
	n := h.nodes[node]
	if n.down {
		return
	}
	n.toNode = append(n.toNode, wire{epoch: epoch, rec: rec, prev: prev, data: data, fullSync: fullSync})
}

// flush starts every write the writer lets start, as the shell's flush.
func (h *progressHarness) flush() {
	for {
		w := h.writer.NextWrite(h.now)
		if w == nil {
			return
		}
		err := h.leader.log.appendData(w.Data, w.Record.MsgOffset)
		h.perform(h.writer.LocalWritten(w.Record.LogID, err))
	}
}

// perform carries out a Ready as the shell does.
func (h *progressHarness) perform(r Ready) {
	if r.Truncate != nil {
		h.leader.log.truncateData(*r.Truncate)
		h.printf("n1 rolls its log back to %d", *r.Truncate)
	}
	var last *Write
	for _, s := range r.Sends {
		if s.Write != last {
			last = s.Write
			for _, n := range h.role.Catchup {
				if h.tracker.Push(n) == nil && !slices.Contains(h.writer.Followers(), n) {
					h.send(n, s.Write.Record.Epoch, s.Write.Record, s.Write.Prev, s.Write.Data, false)
				}
			}
		}
		h.send(s.Node, s.Write.Record.Epoch, s.Write.Record, s.Write.Prev, s.Write.Data, false)
	}
	for _, rec := range r.Commits {
		h.leader.log.recs = append(h.leader.log.recs, rec)
		h.printf("n1 commits %d", rec.LogID)
	}
	for _, rep := range r.Replies {
		if rep.Err != nil {
			h.printf("publish failed: %s", rep.Err.Text)
		}
	}
	if len(r.ShrinkISR) > 0 {
		h.printf("n1 asks the metadata to shrink the ISR by %v", r.ShrinkISR)
	}
	if r.LeaveISR {
		h.printf("n1 disables writes")
	}
	if len(r.Commits) > 0 || r.Truncate != nil {
		h.continueJoin()
	}
}

// apply is a follower taking a write, as the shell's applyReplicated.
func (h *progressHarness) apply(node *progressNode, w wire) {
	line := fmt.Sprintf("%s applies write %d/%d prev=%d/%d epoch=%d", node.name, w.rec.LogID, w.rec.Epoch, w.prev.LogID, w.prev.Epoch, w.epoch)
	if w.fullSync {
		line += " full-sync"
	}
	ack := ackMsg{logID: w.rec.LogID}
	if node.follower == nil {
		ack.epoch, ack.kind, ack.err = node.deposedIn, KindTemporary, ErrEpochMismatch
		h.printf("%s: refused as a deposed leader not told, %s", line, ErrEpochMismatch.Text)
		if !node.down {
			node.toLeader = append(node.toLeader, ack)
		}
		return
	}
	d := node.follower.Check(ReplicaWriteIn{EpochForWrite: w.epoch, Record: w.rec, Prev: w.prev, Data: w.data, FullSync: w.fullSync})
	// After the check, as the shell: the write may have brought its epoch.
	ack.epoch = node.follower.Epoch()
	if c := d.Truncate; c != nil {
		if c.Reset {
			node.log.recs, node.log.data, node.log.base = nil, nil, c.Pos.End
			line += fmt.Sprintf(": restarts its log at %d", c.Pos.End)
		} else {
			line += fmt.Sprintf(": cuts %d records", node.log.Count()-c.Records)
			node.log.recs = node.log.recs[:c.Records]
			node.log.truncateData(c.Pos.End)
		}
		node.follower.Truncated(*c)
	}
	if d.Append {
		err := node.log.appendData(w.data, w.rec.MsgOffset)
		if err == nil {
			node.log.recs = append(node.log.recs, w.rec)
		}
		d = node.follower.Applied(w.rec, err)
	}
	switch {
	case d.Err == ErrMissingPrev:
		ack.kind, ack.err, ack.behind, ack.sample = d.Kind, d.Err, true, recordSample(node.log)
		line += ": behind, has " + refsString(ack.sample)
	case d.Err != nil:
		ack.kind, ack.err = d.Kind, d.Err
		line += ": refused, " + d.Err.Text
	case d.Duplicate:
		line += ": has it"
	}
	h.printf("%s", line)
	if !node.down {
		node.toLeader = append(node.toLeader, ack)
	}
}

// acked is the leader taking a follower's answer, as the shell's
// replicaAcked.
func (h *progressHarness) acked(node string, a ackMsg) {
	what := "ack"
	if a.behind {
		what = "behind"
	} else if a.err != nil {
		what = "refusal"
	}
	h.printf("n1 takes %s's %s of %d", node, what, a.logID)
	in := AckIn{
		Node:     node,
		LogID:    a.logID,
		Behind:   a.behind,
		Refused:  a.err != nil,
		OldEpoch: a.kind == KindTemporary && a.epoch < h.writer.Epoch(),
		InSync:   slices.Contains(h.writer.Followers(), node),
	}
	if !in.InSync && !in.Refused && !in.Behind {
		in.Current = a.logID == h.leader.log.position().Last.LogID
		for _, w := range h.writer.InFlightWrites() {
			in.Current = in.Current || w.Record.LogID == a.logID
		}
	}
	s := h.tracker.Acked(in, h.now)
	if !s.CatchUp && in.Behind {
		h.printf("n1 ignores it: the push under way brings it")
	}
	if s.CatchUp {
		h.catchUp(node, a.sample)
	}
	if s.PushMore {
		h.pushChunk(node)
	}
	if s.Writer {
		h.perform(h.writer.Acked(node, a.logID, errorOrNil(a.err)))
	}
	if s.Hold {
		h.writer.Hold()
		h.printf("n1 holds writes for %s to join", node)
	}
	if s.Join {
		h.continueJoin()
	}
}

func errorOrNil(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}

func (h *progressHarness) catchUp(node string, have []RecordRef) {
	from := sharedFrom(h.leader.log, have)
	if !h.tracker.CatchUp(node, from) {
		h.printf("n1 is already catching %s up from %d", node, from)
		return
	}
	p, ok := newPush(h.leader.log, from)
	if !ok {
		return
	}
	p.chunk = h.chunk
	h.tracker.BeginPush(node, p)
	h.printf("n1 catches %s up from index %d", node, p.next)
	h.pushChunk(node)
}

func (h *progressHarness) pushChunk(node string) {
	p := h.tracker.Push(node)
	if p == nil {
		return
	}
	ws, done, err := p.nextChunk(h.leader.log)
	for _, w := range ws {
		h.send(node, h.writer.Epoch(), w.Record, w.Prev, w.Data, w.FullSync)
	}
	if err != nil {
		h.tracker.PushDone(node)
		return
	}
	if !done {
		return
	}
	h.tracker.PushDone(node)
	for _, w := range h.writer.InFlightWrites() {
		h.send(node, h.writer.Epoch(), w.Record, w.Prev, w.Data, false)
	}
	h.printf("n1 sent %s its last chunk", node)
}

func (h *progressHarness) probe(node string) {
	if h.tracker.Push(node) != nil {
		return
	}
	if w, ok := probeWrite(h.leader.log); ok {
		h.printf("n1 probes %s with %d", node, w.Record.LogID)
		h.send(node, h.writer.Epoch(), w.Record, w.Prev, w.Data, false)
		h.tracker.Probed(node, h.now)
	}
}

func (h *progressHarness) continueJoin() {
	if h.tracker.JoinNext() == "" || h.writer.InFlight() > 0 {
		return
	}
	node, step := h.tracker.ContinueJoin(JoinView{Now: h.now, InFlight: h.writer.InFlight(), Writable: h.writer.Writable(), Last: h.leader.log.position().Last.LogID})
	switch step {
	case JoinRelease:
		h.writer.Release()
		h.printf("n1 releases writes: the join is off")
	case JoinMissed:
		h.writer.Release()
		h.printf("n1 releases writes: %s missed a write", node)
		if rec, _, ok := h.leader.log.lookup(h.tracker.Progress(node).Match); ok {
			h.catchUp(node, []RecordRef{Ref(rec)})
		}
		h.flush()
	case JoinAsk:
		h.asked = node
		h.printf("n1 asks the metadata to add %s", node)
	}
}

// joinAnswered is the metadata's answer to the join asked, as the shell's
// joined: on success the leader takes the role with the follower in the ISR
// and the next epoch.
func (h *progressHarness) joinAnswered(ok bool) {
	node := h.asked
	if node == "" {
		h.printf("no join was asked")
		return
	}
	h.asked = ""
	h.tracker.Joined(node)
	if ok {
		isr := append(slices.Clone(h.role.ISR), node)
		var catchup []string
		for _, n := range h.role.Catchup {
			if n != node {
				catchup = append(catchup, n)
			}
		}
		h.role = Role{Leader: "n1", ISR: isr, Catchup: catchup, EpochForWrite: h.role.EpochForWrite + 1, Replicas: 3}
		followers := h.role.followersOf("n1")
		h.tracker.SetRole(followers, catchup)
		h.perform(h.writer.SetFollowers(followers, h.role.EpochForWrite))
		h.printf("%s joined the ISR in epoch %d", node, h.role.EpochForWrite)
	} else {
		h.printf("the metadata refused %s's join", node)
	}
	h.writer.Release()
	h.flush()
	for _, n := range h.role.Catchup {
		if n != node && !h.tracker.Joining(n) {
			h.probe(n)
		}
	}
}

// shrunk is the metadata's answer to the ISR shrink asked: the followers
// taken out catch up.
func (h *progressHarness) shrunk(ok bool) {
	if !ok {
		h.perform(h.writer.ISRShrunk(errors.New("refused")))
		return
	}
	removed := slices.Clone(h.writer.shrinking)
	role := h.role
	role.ISR, role.Catchup = nil, slices.Clone(h.role.Catchup)
	for _, n := range h.role.ISR {
		if slices.Contains(removed, n) {
			role.Catchup = append(role.Catchup, n)
		} else {
			role.ISR = append(role.ISR, n)
		}
	}
	h.role = role
	h.tracker.SetRole(role.followersOf("n1"), role.Catchup)
	h.printf("the ISR is %v, %v catch up", role.ISR, role.Catchup)
	h.perform(h.writer.ISRShrunk(nil))
}

func (h *progressHarness) nextDeadline() time.Time {
	return earliest(h.writer.NextDeadline(), h.tracker.NextDeadline(h.writer.InFlight()))
}

// wake does what fell due, as the shell's wake.
func (h *progressHarness) wake() {
	h.perform(h.writer.Tick(h.now))
	h.continueJoin()
	for _, n := range h.tracker.ResendsDue(h.now) {
		h.printf("n1 resends to %s", n)
		if h.role.catchingUp(n) {
			h.probe(n)
		}
		for _, w := range h.writer.InFlightWrites() {
			h.send(n, w.Record.Epoch, w.Record, w.Prev, w.Data, false)
		}
	}
	for _, n := range h.tracker.ProbesDue(h.now, h.writer.InFlight()) {
		h.probe(n)
	}
}

// An idle partition must stay without a timer: a tracker whose followers
// came, went down, came back, were probed and caught up has nothing due.
func TestTrackerIdleHasNoDeadline(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tr := NewTracker(200*time.Millisecond, time.Second, true)
	tr.SetRole([]string{"n2"}, []string{"n3"})
	tr.Lead()
	tr.Down("n3", t0)
	tr.Up("n3")
	tr.Probed("n3", now)
	if s := tr.Acked(AckIn{Node: "n3", LogID: 5, Current: true}, now); !s.Hold || !s.Join {
		t.Fatalf("a current ack of a catching-up follower: %+v, want hold and join", s)
	}
	if node, step := tr.ContinueJoin(JoinView{Now: now, Writable: true, Last: 5}); node != "n3" || step != JoinAsk {
		t.Fatalf("join %s %s, want n3 ask", node, step)
	}
	tr.Joined("n3")
	tr.SetRole([]string{"n2", "n3"}, nil)
	if due := tr.NextDeadline(0); !due.IsZero() {
		t.Fatalf("idle tracker due at %v", due)
	}
	for _, n := range []string{"n2", "n3"} {
		if st := tr.State(n); st != StateInSync {
			t.Fatalf("%s is %s, want in-sync", n, st)
		}
	}
}

// Resends fall due in node order and once: a refusal while one is due
// does not move it.
func TestTrackerResendsFallDueOnce(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tr := NewTracker(200*time.Millisecond, time.Second, true)
	tr.SetRole([]string{"n2", "n3"}, nil)
	tr.Acked(AckIn{Node: "n3", LogID: 4, Refused: true, OldEpoch: true, InSync: true}, now)
	tr.Acked(AckIn{Node: "n2", LogID: 4, Refused: true, OldEpoch: true, InSync: true}, now.Add(5*time.Millisecond))
	tr.Acked(AckIn{Node: "n3", LogID: 5, Refused: true, OldEpoch: true, InSync: true}, now.Add(10*time.Millisecond))
	if due := tr.NextDeadline(1); !due.Equal(now.Add(resendAfter)) {
		t.Fatalf("due %v, want %v", due, now.Add(resendAfter))
	}
	if got := tr.ResendsDue(now.Add(resendAfter)); !slices.Equal(got, []string{"n3"}) {
		t.Fatalf("due first: %v", got)
	}
	if got := tr.ResendsDue(now.Add(time.Second)); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("due then: %v", got)
	}
	if got := tr.ResendsDue(now.Add(time.Hour)); len(got) != 0 || !tr.NextDeadline(0).IsZero() {
		t.Fatalf("resends due again: %v", got)
	}
}

// A follower counts as down since its stream first broke: DownAmong with a
// cut-off leaves out one down for less, and a stream up again clears it.
func TestDownAmongCountsFromTheFirstBreak(t *testing.T) {
	tr := NewTracker(time.Second, 0, true)
	tr.Down("n2", t0)
	tr.Down("n2", t0.Add(time.Second)) // the redials' failures keep the first time
	tr.Down("n3", t0.Add(time.Second))
	nodes := []string{"n2", "n3", "n4"}
	if got := tr.DownAmong(nodes, t0.Add(time.Second)); !slices.Equal(got, []string{"n2", "n3"}) {
		t.Fatalf("down at +1s: %v, want [n2 n3]", got)
	}
	if got := tr.DownAmong(nodes, t0.Add(500*time.Millisecond)); !slices.Equal(got, []string{"n2"}) {
		t.Fatalf("down since +500ms: %v, want [n2]", got)
	}
	tr.Up("n2")
	if got := tr.DownAmong(nodes, t0.Add(time.Second)); !slices.Equal(got, []string{"n3"}) {
		t.Fatalf("after n2 came back: %v, want [n3]", got)
	}
}
