package channel

import (
	"strings"
)

// youzan's /channel/setclientlimit caps the RDY of the consumers whose
// client ID or remote address starts with a prefix. youzan matches the
// address alone and applies the cap to the clients connected at the time;
// here the caps are rules of the channel that every consumer is matched
// against as it subscribes and whenever they change, the longest matching
// prefix deciding.

// ClientLimit caps at Ready the RDY of the consumers whose client ID or
// remote address starts with Prefix.
type ClientLimit struct {
	Prefix string
	Ready  int64
}

// SetClientLimits replaces the channel's caps.
func (c *Core) SetClientLimits(ls []ClientLimit) { c.clientLimits = ls }

// ClientLimits are the channel's caps.
func (c *Core) ClientLimits() []ClientLimit { return c.clientLimits }

// ClientLimit is the RDY cap of a consumer with this client ID and remote
// address: that of the longest prefix either starts with; ok is false
// when none does.
func (c *Core) ClientLimit(clientID, addr string) (ready int64, ok bool) {
	best := -1
	for _, l := range c.clientLimits {
		if len(l.Prefix) > best && (strings.HasPrefix(clientID, l.Prefix) || strings.HasPrefix(addr, l.Prefix)) {
			best, ready, ok = len(l.Prefix), l.Ready, true
		}
	}
	return ready, ok
}
