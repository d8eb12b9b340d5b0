package broker

import (
	"github.com/partitamq/partita/actors/topic"
)

// WritesOff is what youzan's /disable/write turned off on this node: no
// publish is written to a partition it leads (WritesOffAll), or to one of
// an ordered topic (WritesOffOrdered). Leaderships stay where they are,
// as youzan's do; the mark is the node's own and a restart clears it, as
// youzan's nsqd keeps it in memory.
type WritesOff int32

const (
	WritesOn WritesOff = iota
	WritesOffOrdered
	WritesOffAll
)

// ErrWritesOff refuses a publish to a partition this node leads while
// /disable/write holds its writes. youzan's nsqd answers such a node's
// publishes "not leader", which its clients retry after a new lookup;
// the text says why.
var ErrWritesOff = &topic.Error{Code: "E_FAILED_ON_NOT_LEADER", Text: "writes disabled on this node (/disable/write)"}

// DisableWrites sets what this node refuses to write.
func (b *Broker) DisableWrites(off WritesOff) {
	b.writesOff.Store(int32(off))
	b.log.Info("writes on this node", "disabled", off.String())
}

// WritesDisabled is what DisableWrites last set.
func (b *Broker) WritesDisabled() WritesOff { return WritesOff(b.writesOff.Load()) }

// refusesWrites: t's partitions led here take no publish now.
func (b *Broker) refusesWrites(t *Topic) bool {
	switch b.WritesDisabled() {
	case WritesOffAll:
		return true
	case WritesOffOrdered:
		return t.Ordered
	}
	return false
}

// String is youzan's name for off, the /disable/write type.
func (off WritesOff) String() string {
	switch off {
	case WritesOffAll:
		return "all"
	case WritesOffOrdered:
		return "ordered"
	}
	return "none"
}
