package topic

import (
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
	"github.com/partitamq/partita/actors/replica"
	"github.com/partitamq/partita/messages"
	"github.com/partitamq/partita/storage"
)

// OffsetSetRequested moves a channel of this partition to a message
// boundary (/channel/setoffset, SUB_ADVANCED). The leader resolves the
// position through the commit log, moves its channel, and answers only
// once every ISR follower has applied the same offset, so all of them
// replay from the same message. Reply runs on the partition actor.
type OffsetSetRequested struct {
	Channel string
	End     bool // special:-1: the committed end
	Mode    storage.SearchMode
	Pos     int64
	Reply   func(OffsetSet)
}

// OffsetSet answers OffsetSetRequested with where the channel now is.
type OffsetSet struct {
	Offset, Count int64
	Err           error
}

// ErrChannelUnknown: setoffset named a channel that could not be opened.
var ErrChannelUnknown = errors.New("channel could not be opened")

// pendingPosition is a setoffset between the channel's move and its
// answer, which waits for the followers' acknowledgements (synced) and for
// the channel's save on this node (saved).
type pendingPosition struct {
	offset, count int64
	reply         func(OffsetSet)
	started       time.Time
	synced, saved bool
	err           error
}

func (a *Actor) offsetSetRequested(ctx actor.Context, m *OffsetSetRequested) {
	if !a.leads() {
		m.Reply(OffsetSet{Err: ErrNotLeader})
		return
	}
	off, count := a.opt.Store.Committed()
	if !m.End {
		var err error
		if off, count, err = a.opt.Store.Seek(m.Mode, m.Pos); err != nil {
			m.Reply(OffsetSet{Err: err})
			return
		}
	}
	pid := a.channel(ctx, m.Channel)
	if pid == nil {
		m.Reply(OffsetSet{Err: ErrChannelUnknown})
		return
	}
	if a.positions == nil {
		a.positions = make(map[int64]*pendingPosition)
	}
	a.syncSeq++
	a.positions[a.syncSeq] = &pendingPosition{offset: off, count: count, reply: m.Reply, started: a.opt.Now()}
	ctx.Send(pid, &channel.PositionSet{Offset: off, Count: count, Token: a.syncSeq})
}

// positionApplied replicates a channel's new position to every ISR
// follower and answers the setoffset when all acknowledged.
func (a *Actor) positionApplied(ctx actor.Context, m *channel.PositionApplied) {
	if _, ok := a.positions[m.Token]; !ok {
		return
	}
	if !a.leads() {
		// The leadership moved since the request: its client asks the new
		// leader, whose followers never heard of this position.
		a.positionDone(m.Token, func(p *pendingPosition) { p.synced, p.err = true, ErrNotLeader })
		return
	}
	followers := a.offsetMembers()
	if len(followers) == 0 || IsEphemeral(m.Channel) {
		a.positionDone(m.Token, func(p *pendingPosition) { p.synced = true })
		return
	}
	token := m.Token
	a.syncSeq++
	s := &offsetSync{pending: map[string]bool{}, started: a.opt.Now(), done: func(err error) {
		a.positionDone(token, func(p *pendingPosition) { p.synced, p.err = true, err })
	}}
	u := &messages.ChannelOffsetUpdate{
		Topic: a.opt.Topic, Partition: a.opt.Partition, Channel: m.Channel,
		VOffset: m.Update.Offset, VCnt: m.Update.Count, Flush: true, AllowBackward: true,
		NeedUpdateConfirmed: true, SyncId: a.syncSeq, EpochForWrite: a.offsetEpoch(),
	}
	for _, f := range followers {
		s.pending[f] = true
		if pid, ok := a.replicas[f]; ok {
			ctx.Send(pid, &replica.ReplicateOffset{Update: u})
		}
	}
	a.syncs[a.syncSeq] = s
}

// positionSaved: the channel's new position is on this node's disk, or
// its save failed.
func (a *Actor) positionSaved(m *channel.PositionSaved) {
	a.positionDone(m.Token, func(p *pendingPosition) {
		p.saved = true
		if m.Err != nil && p.err == nil {
			p.err = fmt.Errorf("%w: this node's save: %v", ErrOffsetNotReplicated, m.Err)
		}
	})
}

// refusePositions answers the setoffsets still pending as the partition
// stops here: its leadership moved, or the node or the topic is going, and
// nothing would answer them. The client asks the leader again.
func (a *Actor) refusePositions() {
	for token, p := range a.positions {
		a.answerPosition(token, p, ErrNotLeader)
	}
}

// expirePositions fails the setoffsets whose position this node has not
// saved within the write timeout (the node's saver retries a failed write
// until one works); the followers' part expires with expireSyncs.
func (a *Actor) expirePositions() {
	timeout := a.opt.Writer.WriteTimeout
	if timeout <= 0 {
		return
	}
	for token, p := range a.positions {
		if !p.saved && a.opt.Now().Sub(p.started) >= timeout {
			err := p.err
			if err == nil {
				err = fmt.Errorf("%w: this node did not save it within %v", ErrOffsetNotReplicated, timeout)
			}
			a.answerPosition(token, p, err)
		}
	}
}

// positionDone records what of a setoffset is done, and answers it once the
// followers acknowledged the position and this node saved it.
func (a *Actor) positionDone(token int64, done func(*pendingPosition)) {
	p, ok := a.positions[token]
	if !ok {
		return
	}
	done(p)
	if p.synced && p.saved {
		a.answerPosition(token, p, p.err)
	}
}

// answerPosition answers a setoffset, which then waits for nothing more.
func (a *Actor) answerPosition(token int64, p *pendingPosition, err error) {
	delete(a.positions, token)
	p.reply(OffsetSet{Offset: p.offset, Count: p.count, Err: err})
}
