package topic

import (
	"sort"
	"time"
)

// A leader keeps one Progress per follower: what the follower acknowledged,
// where its catch-up stands, whether it is joining the ISR, whether its
// stream is down and when a resend to it falls due. The Tracker holds them
// and decides, from what happened to a follower, what the shell does next.
// Like the Writer it owns no clock, goroutine or file: the shell passes the
// time and what it read from the log, and performs what comes back, so its
// transitions are tested by feeding it inputs in order (testdata/progress).

// FollowerState is where a follower stands with its leader.
type FollowerState int

const (
	// StateNone: not a follower in the partition's current role.
	StateNone FollowerState = iota
	// StateInSync: in the ISR; every write waits for it.
	StateInSync
	// StateProbing: catching up with nothing under way; its answer to the
	// next write or probe tells what it lacks, or that it lacks nothing.
	StateProbing
	// StateCatchingUp: being pushed what it lacks, a chunk at a time.
	StateCatchingUp
	// StateJoining: caught up; writes are held for it to join the ISR, or
	// the metadata was asked to add it.
	StateJoining
	// StateDown: its stream is down; nothing sent to it arrives.
	StateDown
)

func (s FollowerState) String() string {
	switch s {
	case StateInSync:
		return "in-sync"
	case StateProbing:
		return "probing"
	case StateCatchingUp:
		return "catching-up"
	case StateJoining:
		return "joining"
	case StateDown:
		return "down"
	}
	return "none"
}

// membership is a follower's part in the role the metadata gave.
type membership int

const (
	memberNone membership = iota
	memberISR
	memberCatchup
)

// Progress is what a leader knows of one follower.
type Progress struct {
	Node string
	// Match is the newest LogID the follower acknowledged while catching
	// up: a join waits for it to reach the last record.
	Match int64
	// From is the commit-log index the follower's current catch-up started
	// from, -1 when none did: refusals of the writes that followed the
	// one that started it say the same and start nothing more.
	From int64
	// DownSince is when the stream to the follower broke, zero while it
	// is up (connected again since).
	DownSince time.Time
	// Joining: the metadata was asked to add the follower to the ISR.
	Joining bool
	// ResendAt is when the writes in flight are sent again to a follower
	// that refused them for an epoch it had not heard of; zero when no
	// resend is due.
	ResendAt time.Time
	// ProbeAt is when a follower still probing is probed again if nothing
	// is in flight: on an idle partition no write would bring its answer,
	// and the last probe's may not have come (a refused join, a probe sent
	// before the follower could take it).
	ProbeAt time.Time

	member membership
	push   *push // the catch-up push under way, nil when none
}

// Next is the commit-log index the follower's push sends next, -1 when no
// push is under way.
func (p *Progress) Next() int64 {
	if p.push == nil {
		return -1
	}
	return p.push.next
}

// Tracker holds a leader's Progress for each follower it has heard of. A
// record outlives the follower's place in the role, as a stream's state
// does: a follower taken out and added back is still known to be down.
type Tracker struct {
	prs map[string]*Progress
	// joinNext is the follower the writes are held for: it acknowledged a
	// current record and joins once the writes in flight drained.
	joinNext string
	joinHeld time.Time // when writes were held for joinNext

	joinWait   time.Duration
	probeEvery time.Duration
	canJoin    bool // the shell can ask the metadata for a join
}

// NewTracker starts a tracker. joinWait is how long writes stay held for a
// joining follower's ack of the last record once nothing else is in flight;
// probeEvery how long after a probe a follower still probing on an idle
// partition is probed again (0: never); canJoin is false where no
// metadata takes a join.
func NewTracker(joinWait, probeEvery time.Duration, canJoin bool) *Tracker {
	return &Tracker{prs: make(map[string]*Progress), joinWait: joinWait, probeEvery: probeEvery, canJoin: canJoin}
}

// Progress returns node's record, made on first mention.
func (t *Tracker) Progress(node string) *Progress {
	p, ok := t.prs[node]
	if !ok {
		p = &Progress{Node: node, From: -1}
		t.prs[node] = p
	}
	return p
}

// State is where node stands. A follower whose stream is down is down
// whatever it was doing; a join outranks the push that may precede it.
func (t *Tracker) State(node string) FollowerState {
	p, ok := t.prs[node]
	switch {
	case !ok:
		return StateNone
	case !p.DownSince.IsZero():
		return StateDown
	case p.Joining || t.joinNext == node:
		return StateJoining
	case p.push != nil:
		return StateCatchingUp
	case p.member == memberISR:
		return StateInSync
	case p.member == memberCatchup:
		return StateProbing
	}
	return StateNone
}

// SetRole records which followers are in the ISR and which catch up.
func (t *Tracker) SetRole(isr, catchup []string) {
	for _, p := range t.prs {
		p.member = memberNone
	}
	for _, n := range isr {
		t.Progress(n).member = memberISR
	}
	for _, n := range catchup {
		t.Progress(n).member = memberCatchup
	}
}

// Lead: this node became the leader. What a previous term learned of the
// followers' logs says nothing of this one's.
func (t *Tracker) Lead() {
	for _, p := range t.prs {
		p.Match, p.From, p.push = 0, -1, nil
	}
}

// StepDown: this node no longer leads. No push goes on and no join waits.
func (t *Tracker) StepDown() {
	t.joinNext = ""
	for _, p := range t.prs {
		p.From, p.push = -1, nil
	}
}

// Down: the stream to node broke. What it carried is lost: a push waiting
// for its ack would wait forever, so it ends; the probe on Up starts anew.
func (t *Tracker) Down(node string, now time.Time) {
	p := t.Progress(node)
	if p.DownSince.IsZero() {
		p.DownSince = now
	}
	t.EndPush(node)
}

// Up: the stream to node connected. It reports whether a follower catching
// up is to be probed, so an idle partition does not wait for a publish to
// find what it lacks.
func (t *Tracker) Up(node string) (probe bool) {
	p := t.Progress(node)
	p.DownSince = time.Time{}
	return p.member == memberCatchup
}

// DownAmong returns those of nodes whose stream has been down since at
// least since, in their order; since = now gives every one down.
func (t *Tracker) DownAmong(nodes []string, since time.Time) []string {
	var down []string
	for _, n := range nodes {
		if p, ok := t.prs[n]; ok && !p.DownSince.IsZero() && !p.DownSince.After(since) {
			down = append(down, n)
		}
	}
	return down
}

// AckIn is a follower's answer to a write, as the tracker needs it.
type AckIn struct {
	Node  string
	LogID int64
	// Behind: refused for lacking the record the write follows.
	Behind bool
	// Refused: any refusal; OldEpoch, a temporary one for an epoch the
	// follower has not heard of yet.
	Refused, OldEpoch bool
	// InSync: the follower is in the write flow's ISR.
	InSync bool
	// Current: LogID is the last committed record or a write in flight.
	Current bool
}

// AckSteps is what the shell does with an ack, in field order.
type AckSteps struct {
	CatchUp  bool // find the newest record the follower shares and call CatchUp
	PushMore bool // send the next chunk of the push
	Writer   bool // hand the ack to the write flow
	Hold     bool // hold the writes for this follower's join
	Join     bool // see whether the join can go on (ContinueJoin)
}

// Acked takes a follower's answer to a write.
func (t *Tracker) Acked(in AckIn, now time.Time) AckSteps {
	p := t.Progress(in.Node)
	if in.Behind {
		if p.push != nil && in.LogID > p.push.awaited {
			// Sent before the push began, which will bring it.
			return AckSteps{}
		}
		// The write is sent again after what the follower lacks.
		return AckSteps{CatchUp: true}
	}
	var s AckSteps
	if !in.Refused {
		p.From = -1
		s.PushMore = p.push != nil && p.push.awaited == in.LogID
	} else {
		t.EndPush(in.Node) // a refused record ends the push
	}
	if in.OldEpoch {
		// The follower has not heard of this epoch yet; the metadata
		// watch brings it within milliseconds.
		if p.ResendAt.IsZero() {
			p.ResendAt = now.Add(resendAfter)
		}
		return s
	}
	if in.InSync {
		s.Writer = true
		return s
	}
	// Not in the ISR: nothing waits for it, but it may join.
	if in.Refused {
		return s
	}
	p.Match = in.LogID // acks come in the order of the stream
	if t.joinNext == in.Node {
		s.Join = true // it may have just acknowledged the last record
		return s
	}
	if !t.canJoin || t.joinNext != "" || t.anyJoining() || !in.Current {
		return s
	}
	// Having applied a current write it has all the leader has.
	t.joinNext, t.joinHeld = in.Node, now
	s.Hold, s.Join = true, true
	return s
}

func (t *Tracker) anyJoining() bool {
	for _, p := range t.prs {
		if p.Joining {
			return true
		}
	}
	return false
}

// CatchUp: node lacks what follows commit-log index from-1. It reports
// whether to push from there; a catch-up from the same index is under
// way already.
func (t *Tracker) CatchUp(node string, from int64) bool {
	p := t.Progress(node)
	if p.From == from {
		return false
	}
	p.From = from
	return true
}

// BeginPush records the push the shell started for node.
func (t *Tracker) BeginPush(node string, ps *push) { t.Progress(node).push = ps }

// Push is node's push under way, nil when none.
func (t *Tracker) Push(node string) *push {
	if p, ok := t.prs[node]; ok {
		return p.push
	}
	return nil
}

// PushDone: the push sent its last chunk, or could not go on. The index it
// started from stays: the follower's refusals of writes sent before it
// acknowledged start nothing new.
func (t *Tracker) PushDone(node string) {
	if p, ok := t.prs[node]; ok {
		p.push = nil
	}
}

// EndPush forgets node's catch-up: its next refusal of a missing record
// starts a new one from where it then stands.
func (t *Tracker) EndPush(node string) {
	if p, ok := t.prs[node]; ok {
		p.push, p.From = nil, -1
	}
}

// JoinStep is what ContinueJoin decided.
type JoinStep int

const (
	JoinNothing JoinStep = iota
	// JoinWait: the follower's ack of the last record is on its way.
	JoinWait
	// JoinRelease: this node no longer leads or takes writes; the join is
	// off and the writes are released.
	JoinRelease
	// JoinMissed: the follower missed a write made while it was joining:
	// release the writes, push it what follows Match, and try again once
	// it is current.
	JoinMissed
	// JoinAsk: ask the metadata to add the follower.
	JoinAsk
)

func (s JoinStep) String() string {
	return [...]string{"nothing", "wait", "release", "missed", "ask"}[s]
}

// JoinView is what ContinueJoin needs of the leader.
type JoinView struct {
	Now      time.Time
	InFlight int
	Writable bool  // this node leads and takes writes
	Last     int64 // LogID of the last committed record
}

// JoinNext is the follower the writes are held for, "" when none.
func (t *Tracker) JoinNext() string { return t.joinNext }

// ContinueJoin moves the held join on once nothing is in flight.
func (t *Tracker) ContinueJoin(v JoinView) (node string, step JoinStep) {
	if t.joinNext == "" || v.InFlight > 0 {
		return "", JoinNothing
	}
	node = t.joinNext
	if !v.Writable {
		t.joinNext = ""
		return node, JoinRelease
	}
	p := t.Progress(node)
	if p.Match != v.Last && v.Now.Sub(t.joinHeld) < t.joinWait {
		return node, JoinWait
	}
	t.joinNext = ""
	if p.Match != v.Last {
		return node, JoinMissed
	}
	p.Joining = true
	return node, JoinAsk
}

// Joined: the metadata answered node's join.
func (t *Tracker) Joined(node string) { t.Progress(node).Joining = false }

// Joining reports whether the metadata was asked to add node.
func (t *Tracker) Joining(node string) bool {
	p, ok := t.prs[node]
	return ok && p.Joining
}

// ResendsDue returns the followers whose resend fell due by now, in order,
// and forgets their deadlines.
func (t *Tracker) ResendsDue(now time.Time) []string {
	var due []string
	for n, p := range t.prs {
		if !p.ResendAt.IsZero() && !p.ResendAt.After(now) {
			p.ResendAt = time.Time{}
			due = append(due, n)
		}
	}
	sort.Strings(due)
	return due
}

// Probed: the shell sent node a probe at now.
func (t *Tracker) Probed(node string, now time.Time) {
	if t.probeEvery > 0 {
		t.Progress(node).ProbeAt = now.Add(t.probeEvery)
	}
}

// ProbesDue returns, in order, the followers still probing whose probe is
// to be sent again by now, while nothing is in flight (a write in flight
// reaches them as a probe would), and forgets their deadlines; the shell's
// probe sets the next.
func (t *Tracker) ProbesDue(now time.Time, inFlight int) []string {
	if inFlight > 0 {
		return nil
	}
	var due []string
	for n, p := range t.prs {
		if t.probeDue(p) && !p.ProbeAt.After(now) {
			p.ProbeAt = time.Time{}
			due = append(due, n)
		}
	}
	sort.Strings(due)
	return due
}

// probeDue: p awaits a probe again. A follower in sync, pushed, joining or
// down is not probed, so its deadline, left from when it was probing,
// keeps no timer armed.
func (t *Tracker) probeDue(p *Progress) bool {
	return !p.ProbeAt.IsZero() && t.State(p.Node) == StateProbing
}

// NextDeadline is the earliest time something here falls due, zero when
// nothing will without an input: a resend, and once nothing is in flight
// (while writes are in flight their commits and acks move things on
// instead) the end of the wait for a held join's ack and a probe to send
// again.
func (t *Tracker) NextDeadline(inFlight int) time.Time {
	var due time.Time
	if t.joinNext != "" && inFlight == 0 {
		due = t.joinHeld.Add(t.joinWait)
	}
	for _, p := range t.prs {
		due = earliest(due, p.ResendAt)
		if inFlight == 0 && t.probeDue(p) {
			due = earliest(due, p.ProbeAt)
		}
	}
	return due
}
