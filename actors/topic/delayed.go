package topic

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/actors/channel"
)

// delayRequested writes a channel's long-delayed REQ into the log as a
// delayed copy, through the same write flow as a PUB, so it is replicated to
// the ISR and acknowledged only once committed everywhere. The channel
// confirms the original only after that.
func (a *Actor) delayRequested(ctx actor.Context, m *channel.DelayRequested) {
	root := ctx.ActorSystem().Root
	mv := m.Move
	a.published(ctx, &Published{
		Bodies:    [][]byte{mv.Body},
		Headers:   headersOf(mv.Header),
		DeliverAt: mv.DeliverAt,
		Delayed:   &DelayedCopy{Channel: m.Channel, OrigID: mv.ID, Attempts: mv.Attempts},
		Reply: func(r Reply) {
			var err error
			if r.Err != nil {
				err = r.Err
			}
			root.Send(m.Reply, &channel.DelayStored{ID: mv.ID, Err: err})
		},
	})
}

// headersOf keeps a delayed copy's header with it, and a headerless one
// without the slice.
func headersOf(h []byte) [][]byte {
	if len(h) == 0 {
		return nil
	}
	return [][]byte{h}
}
