package topic

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/dispatch"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/storage"
)

// Options configure a partition actor.
type Options struct {
	Topic        string
	Partition    int32
	Dir          string // "" for an ephemeral topic
	Store        *storage.Partition
	Writer       WriterConfig
	Channel      channel.Config
	SyncTimeout  time.Duration
	PersistEvery time.Duration
	// States saves the channels' states (channel.Options.States); the
	// partition waits for what they queued as it stops.
	States *storage.ChannelStates
	Logger *slog.Logger
	Now    func() time.Time

	// Dedupe is the topic's dedupe window (dedupe.go); zero is off.
	Dedupe DedupeConfig

	// Retention deletes confirmed segments (retention.go), checked every
	// RetentionEvery (default a minute).
	Retention      storage.RetentionPolicy
	RetentionEvery time.Duration

	// Channels are opened as the actor starts, before it reads a publish:
	// the topic's channels as the node knew them when it started the
	// partition, so none of them misses a message published the moment the
	// partition takes writes.
	Channels []string

	// DeadLetters publishes the channels' dead letters (channel.Options);
	// nil leaves them without max_attempts.
	DeadLetters channel.DeadLetterPublisher

	// OnDiskHealth, if set, hears when writes to this partition's disk
	// start failing (err) and work again (nil), for /ping.
	OnDiskHealth func(err error)

	// Replication. A single node leaves these zero: it leads with an ISR of
	// itself.
	Node string         // this node's ID
	Role Role           // initial role from metadata
	Dial replica.Dialer // opens streams to followers
	// OutOfReach tells a follower's node known to be out of reach
	// (replica.Options.OutOfReach).
	OutOfReach func(node string) replica.Unreachable
	// Attach opens a stream on a session that is up, without blocking
	// (replica.Options.Attach).
	Attach replica.Attacher
	// FramesInFlight is how many frames of writes each follower may have
	// unanswered (replica.Options.FramesInFlight).
	FramesInFlight int
	// RedialMax is the wait between attempts to reach a follower once an
	// early one failed (replica.Options.RedialMax).
	RedialMax time.Duration
	ShrinkISR func(ctx context.Context, remove []string) (Role, error) // compare-and-swap of the partition's ISR
	JoinISR   func(ctx context.Context, node string) (Role, error)     // a caught-up replica into the ISR, EpochForWrite+1
	Reenable  func(ctx context.Context) (Role, error)                  // EpochForWrite+1 after writes were disabled
	Disabled  func(ctx context.Context) error                          // records writes disabled in the metadata

	// CatchupLimit paces catch-up pushes, shared by the node's partitions
	// (nil: no limit).
	CatchupLimit *CatchupLimit

	// Observer hears events for metrics; ActorProps adds options (metrics
	// middleware) to the props of the channel and replica actors, by kind.
	Observer   Observer
	ActorProps func(kind string) []actor.PropsOption
}

// Actor is the partition actor: the only writer of its partition's log and
// commit log. Channels are its children.
type Actor struct {
	opt      Options
	writer   *Writer
	follower *Follower // set while this node follows
	role     Role
	replicas map[string]*actor.PID
	roleSet  bool // applyRole ran once
	diskErr  error
	syncs    map[int64]*offsetSync
	// joining: a join waiting for the replica to hold the ordered
	// channels' positions (join.go); nil when none.
	joining *joinSync
	// handOver: a planned move's hold of the writes (handover.go).
	handOver handOver
	// positions: setoffsets waiting for their channel to move.
	positions map[int64]*pendingPosition
	syncSeq   int64
	// progress: what this leader knows of each follower (progress.go);
	// replicas are the actors that carry its writes to them.
	progress   *Tracker
	reenabling bool // a new epoch to take writes again is asked for or scheduled

	// pushesPaused: followers whose next catch-up chunk waits for the
	// node's catch-up rate, and until when.
	pushesPaused map[string]time.Time

	flushing bool
	// here is the Here of the last publish taken (dispatch.Here): its
	// commit passes it to the channels, whose turns then run on the
	// publisher's goroutine too when it is still running them; once it is
	// not, the Here refuses and they go to the workers.
	here     *dispatch.Here
	paused   bool
	channels map[string]*actor.PID
	// ends: channels of which one of deletion and the actor's stop has
	// happened and the other not yet (channelEnd).
	ends   map[string]*channelEnd
	ending bool // stopping: no channel or replica actor is started any more

	// A topic with no channel keeps what is published for its first channel.
	firstStart, firstStartCount int64

	pubMessages, pubBytes int64
	// dedupeHits counts the duplicates answered by this partition's
	// earlier writers; the current one counts its own.
	dedupeHits int64
	starts     []writeStart // records written and not committed, for latencies
	retainedAt time.Time
	wakes      wakeTimer
}

// Props makes a partition actor over an opened store.
func Props(opt Options) *actor.Props {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.SyncTimeout <= 0 {
		opt.SyncTimeout = 2 * time.Second
	}
	if opt.Observer == nil {
		opt.Observer = nopObserver{}
	}
	return actor.PropsFromProducer(func() actor.Actor {
		opt.Writer.Partition = opt.Partition
		if opt.Role.Leader == "" {
			opt.Role = Role{Leader: opt.Node, ISR: []string{opt.Node}, EpochForWrite: opt.Writer.Epoch, Replicas: 1}
		}
		return &Actor{
			opt:        opt,
			writer:     NewWriter(opt.Writer, committedPosition(opt.Store, opt.Partition)),
			channels:   make(map[string]*actor.PID),
			ends:       make(map[string]*channelEnd),
			replicas:   make(map[string]*actor.PID),
			syncs:      make(map[int64]*offsetSync),
			progress:   NewTracker(joinWait(opt.Writer.ShrinkAfter), opt.Writer.ShrinkAfter, opt.JoinISR != nil),
			firstStart: opt.Store.Log.Start(),
		}
	})
}

func (a *Actor) Receive(ctx actor.Context) {
	a.receive(ctx)
	switch ctx.Message().(type) {
	case *actor.Stopping, *actor.Stopped, *actor.Restarting:
		a.wakes.stop()
	default:
		a.rearm(ctx)
	}
}

// receive hands each message to the method named for what happened: the
// partition's own life and timers here, the rest by what they concern.
func (a *Actor) receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		a.applyRole(ctx, a.opt.Role)
		for _, name := range a.opt.Channels {
			a.channel(ctx, name)
		}
	case *flushWrites:
		a.flushDue(ctx)
	case *wakeDue:
		a.timerFired(ctx, m)
	case *actor.Stopping:
		a.stopping(ctx)
	case *actor.Stopped:
		a.stopped()
	default:
		if !a.receiveReplication(ctx, m) {
			a.receiveRequest(ctx, m)
		}
	}
}

// receiveReplication takes what keeps the replicas in step: role changes,
// the leader's writes and offsets, the replica actors' reports and the
// metadata's answers. It reports whether m was one of them.
func (a *Actor) receiveReplication(ctx actor.Context, m any) bool {
	switch m := m.(type) {
	case *RoleChanged:
		a.applyRole(ctx, m.Role)
	case *MovePlanned:
		a.movePlanned(ctx, m)
	case *handOverLapsed:
		a.handOverEnded(ctx, m)
	case *MoveNotStored:
		a.moveNotStored(ctx)
	case *ReplicaWriteArrived:
		a.applyReplicated(ctx, m)
	case *ReplicaWritesArrived:
		a.applyReplicatedFrame(ctx, m)
	case *replica.Acked:
		a.replicaAcked(ctx, m)
	case *replica.FollowerDown:
		a.followerDown(ctx, m)
	case *replica.FollowerUp:
		a.followerUp(ctx, m)
	case *isrShrunk:
		a.shrunk(ctx, m)
	case *isrJoined:
		a.joined(ctx, m)
	case *disabledStored:
		a.reenableLater(ctx)
	case *reenableDue:
		a.reenable(ctx)
	case *reenabled:
		a.reenabled(ctx, m)
	case *channel.ConfirmedMoved:
		a.replicateOffset(ctx, m)
	case *OffsetArrived:
		a.offsetArrived(ctx, m)
	case *channel.OrderedFinished:
		a.orderedFinished(ctx, m)
	case *channel.PositionReported:
		a.positionReported(ctx, m)
	default:
		return false
	}
	return true
}

// receiveRequest takes publishes and what the broker and the channels ask
// of the partition.
func (a *Actor) receiveRequest(ctx actor.Context, m any) {
	switch m := m.(type) {
	case *Published:
		a.published(ctx, m)
	case *channel.DelayRequested:
		a.delayRequested(ctx, m)
	case *MessageWanted:
		a.messageWanted(ctx, m)
	case *OffsetSetRequested:
		a.offsetSetRequested(ctx, m)
	case *channel.PositionApplied:
		a.positionApplied(ctx, m)
	case *channel.PositionSaved:
		a.positionSaved(m)
	case *ChannelWanted:
		a.channelWanted(ctx, m)
	case *ChannelDeleted:
		a.channelDeleted(ctx, m)
	case *actor.Terminated:
		a.childStopped(ctx, m)
	case *PauseChanged:
		a.pauseChanged(ctx, m)
	case *SettingsChanged:
		a.settingsChanged(ctx, m)
	case *Emptied:
		a.startFirstChannelAtEnd()
	case *StatsRequested:
		a.stats(ctx)
	}
}

// stopping writes the publishes already accepted before the partition stops.
func (a *Actor) stopping(ctx actor.Context) {
	a.flush(ctx)
	a.perform(ctx, a.writer.Disable())
	a.ending = true
	a.refuseChannelWaiters(ctx)
	a.refusePositions()
}

func (a *Actor) stopped() {
	if a.opt.Dir != "" {
		a.opt.States.Flush(a.opt.Dir)
	}
	if err := a.opt.Store.Close(); err != nil {
		a.opt.Logger.Error("closing partition", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
	}
}

// perform carries out what the write flow decided, in its order.
func (a *Actor) perform(ctx actor.Context, r Ready) {
	if r.Truncate != nil {
		if err := a.opt.Store.Log.Truncate(*r.Truncate); err != nil {
			a.opt.Logger.Error("rolling back partition log", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
		}
	}
	if len(r.Sends) > 0 {
		a.sendToReplicas(ctx, r.Sends)
	}
	committed := false
	// A failed write lets the publishes that waited on its IDs be written
	// (Writer.unpark).
	rolledBack := r.Truncate != nil
	for _, rec := range r.Commits {
		if err := a.opt.Store.Commit(rec); err != nil {
			a.failCommit(ctx, r, rec, err)
			return
		}
		a.pubMessages += int64(rec.MsgNum)
		a.pubBytes += int64(rec.MsgSize)
		a.observeCommit(rec)
		committed = true
	}
	if committed {
		a.diskHealth(nil)
		a.announce(ctx)
	}
	if r.unpark {
		// The commits are on disk: what waited on their IDs is settled.
		r.Replies = append(r.Replies, a.writer.unpark()...)
	}
	for _, rep := range r.Replies {
		rep.Token.(func(Reply))(rep)
	}
	if len(r.ShrinkISR) > 0 {
		a.shrinkISR(ctx, r.ShrinkISR)
	}
	if r.LeaveISR {
		a.opt.Logger.Error("partition leader failed a write: writes disabled", "topic", a.opt.Topic, "partition", a.opt.Partition)
		a.writesDisabled(ctx)
	}
	if len(r.Commits) > 0 || r.Truncate != nil {
		a.continueJoin(ctx)
		a.answerDrained()
	}
	// Publishes that queued while the window was full wait for a commit
	// to free it: without this flush they would wait for the next publish.
	if (len(r.Commits) > 0 || rolledBack) && a.writer != nil && a.writer.Waiting() > 0 {
		a.flushSoon(ctx)
	}
}

// failCommit handles a commit record that could not be appended: that
// record and every later one fail (nothing uncommitted is acknowledged),
// the log is cut back to the committed end, and the writes still in flight
// fail too. Records committed before it in the same Ready stand.
func (a *Actor) failCommit(ctx actor.Context, r Ready, rec storage.CommitRecord, err error) {
	a.opt.Logger.Error("appending commit record", "topic", a.opt.Topic, "partition", a.opt.Partition, "err", err)
	a.diskHealth(err)
	_ = a.opt.Store.Log.Truncate(rec.MsgOffset)
	failure := localError(err)
	for _, rep := range r.Replies {
		if rep.Err == nil && int64(rep.FirstID) >= rec.LogID {
			rep.Err = failure
		}
		rep.Token.(func(Reply))(rep)
	}
	for _, rep := range a.writer.Abandon(a.committedPosition(), failure).Replies {
		rep.Token.(func(Reply))(rep)
	}
	a.announce(ctx)
	if a.writer.Waiting() > 0 {
		// Publishes that waited on an abandoned write's IDs.
		a.flushSoon(ctx)
	}
}

func (a *Actor) stats(ctx actor.Context) {
	end, count := a.opt.Store.Committed()
	last, _ := a.opt.Store.Commits.Last()
	st := &Stats{
		Topic:        a.opt.Topic,
		Partition:    a.opt.Partition,
		End:          end,
		Committed:    count,
		Records:      a.opt.Store.Commits.Count(),
		MessageCount: a.pubMessages,
		MessageBytes: a.pubBytes,
		Paused:       a.paused,
		Writable:     a.leads() && a.writer.Writable() && !a.writer.Held(),
		InFlight:     a.writer.InFlight(),
		Waiting:      a.writer.Waiting(),
		Leader:       a.leads(),
		LastLogID:    last.LogID,
		LastEpoch:    last.Epoch,
		ISR:          len(a.role.ISR),
		Replicas:     max(a.role.Replicas, 1),
		Catchup:      len(a.role.Catchup),
		Syncs:        a.opt.Store.Syncs(),
		Dir:          a.opt.Store.Dir(),
		Disabled:     a.leads() && !a.writer.Writable(),
		SyncEvery:    a.opt.Store.SyncEvery(),
		Retention:    a.opt.Retention,
		DedupeWindow: a.opt.Dedupe.Window,
		DedupeHits:   a.dedupeHits + a.writer.Dedupe().Hits(),
	}
	if a.leads() {
		st.DedupeEntries = a.writer.Dedupe().Entries()
	}
	if a.leads() {
		st.Followers = append(a.role.followersOf(a.opt.Node), a.role.Catchup...)
	}
	if len(a.channels) == 0 {
		st.Depth = count - a.firstStartCount
	}
	names := make([]string, 0, len(a.channels))
	for n := range a.channels {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st.ChannelActors = append(st.ChannelActors, a.channels[n])
	}
	ctx.Respond(st)
}

// diskHealth reports a change between failing and working disk writes.
func (a *Actor) diskHealth(err error) {
	if (err == nil) == (a.diskErr == nil) {
		return
	}
	a.diskErr = err
	if a.opt.OnDiskHealth != nil {
		a.opt.OnDiskHealth(err)
	}
}

func (a *Actor) lastLogID() int64 {
	last, _ := a.opt.Store.Commits.Last()
	return last.LogID
}

func (a *Actor) committedPosition() Position { return committedPosition(a.opt.Store, a.opt.Partition) }

func committedPosition(store *storage.Partition, partition int32) Position {
	end, count := store.Committed()
	pos := Position{NextID: FirstID(partition), End: end, Count: count}
	if last, ok := store.Commits.Last(); ok {
		pos.NextID, pos.Last = uint64(last.LastMsgLogID)+1, Ref(last)
	}
	return pos
}

// recordByLogID finds a committed record by its LogID.
func (a *Actor) recordByLogID(id int64) (storage.CommitRecord, int64, bool) {
	return findByLogID(storeLog{a.opt.Store}, id)
}
