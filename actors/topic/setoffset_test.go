package topic

import (
	"errors"
	"testing"
	"time"

	"github.com/partitamq/partita/actors/channel"
)

// A setoffset is answered once the followers acknowledged the position and
// this node saved it, in either order; a save that failed, or that did not
// end within the write timeout, fails it.
func TestSetOffsetAnsweredOnceFollowersAndThisNodeHoldIt(t *testing.T) {
	now := time.Unix(1000, 0)
	newActor := func() (*Actor, *[]OffsetSet) {
		var answers []OffsetSet
		a := &Actor{opt: Options{Writer: WriterConfig{WriteTimeout: 5 * time.Second}, Now: func() time.Time { return now }},
			positions: map[int64]*pendingPosition{}}
		a.positions[1] = &pendingPosition{offset: 40, count: 2, started: now, reply: func(s OffsetSet) { answers = append(answers, s) }}
		return a, &answers
	}
	synced := func(a *Actor, err error) {
		a.positionDone(1, func(p *pendingPosition) { p.synced, p.err = true, err })
	}

	t.Run("saved, then synced", func(t *testing.T) {
		a, answers := newActor()
		a.positionSaved(&channel.PositionSaved{Token: 1})
		if len(*answers) != 0 {
			t.Fatalf("answered %+v before the followers acknowledged", *answers)
		}
		synced(a, nil)
		if len(*answers) != 1 || (*answers)[0] != (OffsetSet{Offset: 40, Count: 2}) || len(a.positions) != 0 {
			t.Fatalf("answers %+v (%d pending), want one at 40, 2", *answers, len(a.positions))
		}
	})
	t.Run("synced, then saved", func(t *testing.T) {
		a, answers := newActor()
		synced(a, nil)
		if len(*answers) != 0 {
			t.Fatalf("answered %+v before this node saved the position", *answers)
		}
		a.positionSaved(&channel.PositionSaved{Token: 1})
		if len(*answers) != 1 || (*answers)[0].Err != nil {
			t.Fatalf("answers %+v, want one without an error", *answers)
		}
	})
	t.Run("the save failed", func(t *testing.T) {
		a, answers := newActor()
		synced(a, nil)
		a.positionSaved(&channel.PositionSaved{Token: 1, Err: errors.New("disk full")})
		if len(*answers) != 1 || !errors.Is((*answers)[0].Err, ErrOffsetNotReplicated) {
			t.Fatalf("answers %+v, want one failed with ErrOffsetNotReplicated", *answers)
		}
	})
	t.Run("the save never ends", func(t *testing.T) {
		a, answers := newActor()
		synced(a, nil)
		if due := a.syncsDeadline(); !due.Equal(now.Add(5 * time.Second)) {
			t.Fatalf("deadline %v, want the write timeout after the setoffset", due)
		}
		now = now.Add(4 * time.Second)
		a.expirePositions()
		if len(*answers) != 0 {
			t.Fatalf("answered %+v before the write timeout", *answers)
		}
		now = now.Add(time.Second)
		a.expirePositions()
		answeredOnce(t, a, answers, ErrOffsetNotReplicated)
	})

	t.Run("the leadership moved", func(t *testing.T) {
		a, answers := newActor()
		a.opt.Node, a.role.Leader = "n1", "n2"
		a.positionApplied(nil, &channel.PositionApplied{Channel: "c", Token: 1})
		a.positionSaved(&channel.PositionSaved{Token: 1})
		if len(*answers) != 1 || !errors.Is((*answers)[0].Err, ErrNotLeader) {
			t.Fatalf("answers %+v, want one failed with ErrNotLeader", *answers)
		}
	})

	t.Run("the partition stops", func(t *testing.T) {
		a, answers := newActor()
		a.refusePositions()
		answeredOnce(t, a, answers, ErrNotLeader)
	})
}

// answeredOnce checks that the setoffset got one answer, failed with want,
// and that nothing is pending: the save that ends late answers nothing.
func answeredOnce(t *testing.T, a *Actor, answers *[]OffsetSet, want error) {
	t.Helper()
	if len(*answers) != 1 || !errors.Is((*answers)[0].Err, want) || len(a.positions) != 0 {
		t.Fatalf("answers %+v (%d pending), want one failed with %v", *answers, len(a.positions), want)
	}
	a.positionSaved(&channel.PositionSaved{Token: 1})
	if len(*answers) != 1 {
		t.Fatalf("answered again after the save ended: %+v", *answers)
	}
}
