package protocol_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/partitamq/partita/protocol"
)

func subAdvanced(t *testing.T, c *client, args string) {
	t.Helper()
	c.identify(map[string]any{})
	c.send("SUB_ADVANCED "+args, nil)
	c.response(protocol.ResponseOK)
}

// SUB_ADVANCED's start position moves the channel for its first consumer
// only; special:-1 starts at the end.
func TestSubAdvancedStartPosition(t *testing.T) {
	n := startNode(t)
	var bodies []string
	for i := range 10 {
		bodies = append(bodies, fmt.Sprint(i))
	}
	publish(t, n, "adv", bodies...)

	first := dial(t, n)
	subAdvanced(t, first, "adv ch 0 msgcount:7")
	first.rdy(10)
	for _, want := range []string{"7", "8", "9"} {
		if m := first.youzanMessage(false, true); string(m.Body) != want {
			t.Fatalf("first consumer got %q, want %q", m.Body, want)
		}
	}
	second := dial(t, n)
	subAdvanced(t, second, "adv ch 0 msgcount:0")
	second.rdy(10)
	second.nothingFor(200 * time.Millisecond)

	late := dial(t, n)
	subAdvanced(t, late, "adv late 0 special:-1")
	late.rdy(10)
	publish(t, n, "adv", "10")
	if m := late.youzanMessage(false, true); string(m.Body) != "10" {
		t.Fatalf("special:-1 consumer got %q, want the new message", m.Body)
	}

	bad := dial(t, n)
	bad.identify(map[string]any{})
	bad.send("SUB_ADVANCED adv ch 0 msgcount:x", nil)
	bad.fatal(`E_INVALID SUB_ADVANCED invalid start position "msgcount:x": position must be timestamp:<sec>, msgcount:<n>, virtual_queue:<bytes> or special:-1`)
}
