package topic

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/partitamq/partita/storage"
)

// MessageWanted asks a partition for one committed message (/message/get);
// the answer is a *MessageFound.
type MessageWanted struct {
	Mode storage.SearchMode
	Pos  int64
}

// MessageFound answers MessageWanted. Whoever asked then asks each channel
// actor where the message stands, so the partition never waits on them.
type MessageFound struct {
	Message       storage.Located
	Err           error
	Leader        bool
	ChannelActors map[string]*actor.PID
}

func (a *Actor) messageWanted(ctx actor.Context, m *MessageWanted) {
	l, err := a.opt.Store.Locate(m.Mode, m.Pos)
	found := &MessageFound{Message: l, Err: err, Leader: a.leads(), ChannelActors: make(map[string]*actor.PID, len(a.channels))}
	if err == nil {
		// The body and header alias a read buffer; the answer outlives
		// this call.
		found.Message.Body = append([]byte(nil), l.Body...)
		found.Message.Header = append([]byte(nil), l.Header...)
	}
	for name, pid := range a.channels {
		found.ChannelActors[name] = pid
	}
	ctx.Respond(found)
}
