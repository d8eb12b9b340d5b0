package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// A clock run keeps at most its window unanswered, and sends a refused
// partition again once its retry is due, not after the rest.
func TestClockRunRetriesEachPartitionOnItsOwnClock(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	var (
		mu       sync.Mutex
		got      []string // PUB lines in the order the server read them
		maxOut   int
		refusals = map[string]int{"p1": 2} // p1 is refused twice
	)
	go func() {
		defer server.Close()
		r := bufio.NewReader(server)
		pending := 0
		var queue []string
		answer := func() {
			p := queue[0]
			queue = queue[1:]
			pending--
			typ, text := uint32(0), "OK"
			mu.Lock()
			if refusals[p] > 0 {
				refusals[p]--
				typ, text = 1, "E_PUB_TOO_MUCH_WAITING busy"
			}
			mu.Unlock()
			frame := binary.BigEndian.AppendUint32(nil, uint32(4+len(text)))
			frame = binary.BigEndian.AppendUint32(frame, typ)
			server.Write(append(frame, text...))
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			var size [4]byte
			if _, err := io.ReadFull(r, size[:]); err != nil {
				return
			}
			if _, err := io.ReadFull(r, make([]byte, binary.BigEndian.Uint32(size[:]))); err != nil {
				return
			}
			p := strings.Fields(line)[1]
			pending++
			queue = append(queue, p)
			mu.Lock()
			got = append(got, p)
			maxOut = max(maxOut, pending)
			mu.Unlock()
			if r.Buffered() == 0 {
				for len(queue) > 0 {
					answer()
				}
			}
		}
	}()
	pc := &pubConn{c: client, r: bufio.NewReader(client), w: bufio.NewWriter(client)}
	names := []string{"p0", "p1", "p2", "p3"}
	queue := make([]clockEntry, len(names))
	for i := range names {
		queue[i] = clockEntry{i: i}
	}
	const retry = 30 * time.Millisecond
	refusedAt := map[int]time.Time{}
	var early []string
	left, err := clockRun(context.Background(), pc, 2, retry, time.Now().Add(10*time.Second), queue,
		func(i int) {
			if at, ok := refusedAt[i]; ok && time.Since(at) < retry {
				early = append(early, names[i])
			}
			pc.writePub(names[i], 0, []byte("x"))
		},
		func(i int, text string) bool {
			if text != "" {
				refusedAt[i] = time.Now()
				return true
			}
			return false
		})
	if err != nil || len(left) != 0 {
		t.Fatalf("left %v, err %v", left, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := "p0 p1 p2 p3 p1 p1"; strings.Join(got, " ") != want {
		t.Errorf("PUBs went out as %v, want %s", got, want)
	}
	if maxOut > 2 {
		t.Errorf("%d PUBs unanswered at once with a window of 2", maxOut)
	}
	if len(early) > 0 {
		t.Errorf("sent again before the retry was due: %v", early)
	}
}
