// Command floodpub floods one node with pipelined PUBs for a while and
// prints what it answered as JSON. The cluster tests run it as a process
// of its own, built without the race detector, so that the load they
// offer does not depend on how much the detector slows the test binary.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/partitamq/partita/internal/flood"
)

func main() {
	addr := flag.String("addr", "", "the node's TCP address")
	targets := flag.String("partitions", "", "comma-separated topic:partition pairs to publish to, round robin")
	conns := flag.Int("conns", 4, "connections to the node")
	window := flag.Int("window", 6000, "PUBs each connection keeps unanswered at most")
	name := flag.String("name", "flood", "prefix of every body, unique per process")
	runFor := flag.Duration("for", 4*time.Second, "how long to publish")
	flag.Parse()
	ts, err := parseTargets(*targets)
	if err != nil || *addr == "" {
		fmt.Fprintln(os.Stderr, "floodpub: -addr and -partitions topic:partition,... are needed:", err)
		os.Exit(2)
	}
	deadline := time.Now().Add(*runFor)
	stop := func() bool { return !time.Now().Before(deadline) }
	var mu sync.Mutex
	var all flood.Result
	var wg sync.WaitGroup
	for c := range *conns {
		wg.Go(func() {
			r := flood.Publish(*addr, ts, *name+"-"+strconv.Itoa(c), *window, stop)
			mu.Lock()
			all.Add(r)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := json.NewEncoder(os.Stdout).Encode(all); err != nil {
		fmt.Fprintln(os.Stderr, "floodpub:", err)
		os.Exit(1)
	}
}

func parseTargets(s string) ([]flood.Target, error) {
	var ts []flood.Target
	for _, f := range strings.Split(s, ",") {
		topic, p, ok := strings.Cut(f, ":")
		n, err := strconv.ParseInt(p, 10, 32)
		if !ok || err != nil || topic == "" {
			return nil, fmt.Errorf("bad partition %q", f)
		}
		ts = append(ts, flood.Target{Topic: topic, Partition: int32(n)})
	}
	return ts, nil
}
