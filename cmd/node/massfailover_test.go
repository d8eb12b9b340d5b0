package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/partitamq/partita/protocol"
)

// massFailoverPartitions is how many partitions the test spreads over three
// nodes; PARTITA_MASS_FAILOVER_PARTITIONS=10000 runs the full-size case.
func massFailoverPartitions(t *testing.T) int {
	if v := os.Getenv("PARTITA_MASS_FAILOVER_PARTITIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 3 {
			t.Fatalf("PARTITA_MASS_FAILOVER_PARTITIONS=%q: want a number of partitions, 3 or more", v)
		}
		return n
	}
	return 1000
}

// pipelinedPub publishes one body to each listed partition over one NSQ
// connection, all commands first and then their answers, which come back
// in order. It returns the partitions that answered OK.
func pipelinedPub(addr, topic string, partitions []int32, body func(int32) string) (map[int32]bool, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriter(c)
	w.WriteString(protocol.MagicV2)
	for _, p := range partitions {
		b := body(p)
		fmt.Fprintf(w, "PUB %s %d\n", topic, p)
		binary.Write(w, binary.BigEndian, uint32(len(b)))
		w.WriteString(b)
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	ok := map[int32]bool{}
	r := bufio.NewReader(c)
	for _, p := range partitions {
		typ, data, err := protocol.ReadFrame(r)
		for err == nil && typ == protocol.FrameTypeResponse && string(data) == "_heartbeat_" {
			typ, data, err = protocol.ReadFrame(r)
		}
		if err != nil {
			return ok, err // a fatal error closed the connection: the rest go again
		}
		if typ == protocol.FrameTypeResponse && string(data) == "OK" {
			ok[p] = true
		}
	}
	return ok, nil
}

// A node leading a third of many partitions is killed with SIGKILL: every
// partition it led takes a PUB again within 3 s with the default 2 s lease,
// and every acknowledged message is still there.
func TestKilledNodesPartitionsAllWritableAgain(t *testing.T) {
	total := massFailoverPartitions(t)
	c := startCluster(t, 3)
	if code, body := postHTTP(t, c.nodes["n1"].HTTP, fmt.Sprintf("/topic/create?topic=wide&partition_num=%d&replicator=3", total), ""); code != 200 {
		t.Fatalf("creating %d partitions: %d %s", total, code, body)
	}
	all := make([]int32, total)
	for i := range all {
		all[i] = int32(i)
	}
	acked := map[string]bool{}
	before := func(p int32) string { return fmt.Sprintf("before-%d", p) }
	pending := all
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == 20 {
			t.Fatalf("%d partitions never took their first PUB", len(pending))
		}
		ok, _ := pipelinedPub(c.nodes["n1"].TCP, "wide", pending, before)
		var left []int32
		for _, p := range pending {
			if ok[p] {
				acked[before(p)] = true
			} else {
				left = append(left, p)
			}
		}
		pending = left
	}

	states, err := c.assign.List(context.Background(), "wide")
	if err != nil {
		t.Fatal(err)
	}
	led := map[string][]int32{}
	for _, st := range states {
		led[st.Leader] = append(led[st.Leader], st.Partition)
	}
	victim := "n1"
	for id, ps := range led {
		if len(ps) > len(led[victim]) {
			victim = id
		}
	}
	var survivor string
	for id := range c.nodes {
		if id != victim {
			survivor = id
			break
		}
	}
	t.Logf("killing %s, leader of %d of %d partitions", victim, len(led[victim]), total)

	after := func(p int32) string { return fmt.Sprintf("after-%d", p) }
	killed := time.Now()
	c.nodes[victim].Kill(t)
	pending = led[victim]
	var last time.Duration
	for len(pending) > 0 {
		if time.Since(killed) > 60*time.Second {
			t.Fatalf("%d partitions still not writable 60 s after the kill", len(pending))
		}
		ok, _ := pipelinedPub(c.nodes[survivor].TCP, "wide", pending, after)
		var left []int32
		for _, p := range pending {
			if ok[p] {
				acked[after(p)] = true
			} else {
				left = append(left, p)
			}
		}
		if len(left) < len(pending) {
			last = time.Since(killed)
		}
		pending = left
	}
	t.Logf("every partition of the killed node took a PUB again %v after the kill", last.Round(time.Millisecond))
	if !raceEnabled && last > 3*time.Second {
		t.Errorf("the last partition took a PUB %v after the kill, want within 3 s", last)
	}

	var lookups []string
	for id, n := range c.nodes {
		if id != victim {
			lookups = append(lookups, n.HTTP)
		}
	}
	deliversAll(t, lookups, "wide", "check", acked)
}
