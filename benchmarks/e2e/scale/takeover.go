package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// takeoverFigures are the steps of a Partita failover as the surviving
// nodes logged them, in seconds after the kill. The probe measures when
// partitions take PUBs again; these say how much of that went to finding
// the node dead and electing its partitions' leaders, and how much to the
// new leaders' first writes.
type takeoverFigures struct {
	// EvictedS is when a survivor found the killed node's ports refusing
	// and revoked its registration; -1 when none logged it (its lease
	// lapsed instead, or the nodes log above info).
	EvictedS  float64 `json:"evicted_s"`
	EvictedBy int     `json:"evicted_by,omitempty"`
	// ElectedS is when the last failover round that elected a leader
	// ended; -1 when none was logged. Rounds and Elected count those rounds and
	// the leaders they elected, and LongestRoundS is the longest's length.
	ElectedS      float64 `json:"elected_s"`
	Rounds        int     `json:"rounds"`
	Elected       int     `json:"elected"`
	LongestRoundS float64 `json:"longest_round_s"`
}

var (
	logTime     = regexp.MustCompile(`^time=(\S+) `)
	roundFields = regexp.MustCompile(` elected=(\d+) .* took=(\S+)`)
)

// newTakeover is figures with nothing logged yet.
func newTakeover() *takeoverFigures { return &takeoverFigures{EvictedS: -1, ElectedS: -1} }

// takeoverFrom reads the survivors' logs for the lines the failover
// wrote after killedAt.
func takeoverFrom(killedAt time.Time, survivors []*node) *takeoverFigures {
	t := newTakeover()
	for _, n := range survivors {
		f, err := os.Open(n.log)
		if err != nil {
			continue
		}
		t.read(f, killedAt, n.idx)
		f.Close()
	}
	return t
}

// read adds one node's log lines, of node idx, from after killedAt.
func (t *takeoverFigures) read(r io.Reader, killedAt time.Time, idx int) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		evicted := strings.Contains(line, `msg="peer's cluster port refuses connections`)
		round := strings.Contains(line, `msg="failover round"`)
		if !evicted && !round {
			continue
		}
		m := logTime.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, m[1])
		if err != nil || at.Before(killedAt) {
			continue
		}
		s := at.Sub(killedAt).Seconds()
		if evicted {
			if t.EvictedS < 0 || s < t.EvictedS {
				t.EvictedS, t.EvictedBy = s, idx
			}
			continue
		}
		f := roundFields.FindStringSubmatch(line)
		if f == nil {
			continue
		}
		elected, _ := strconv.Atoi(f[1])
		took, err := time.ParseDuration(f[2])
		if elected == 0 || err != nil {
			continue
		}
		t.Rounds++
		t.Elected += elected
		t.ElectedS = max(t.ElectedS, s)
		t.LongestRoundS = max(t.LongestRoundS, took.Seconds())
	}
}

func (t *takeoverFigures) String() string {
	evicted := "no eviction logged"
	if t.EvictedS >= 0 {
		evicted = fmt.Sprintf("evicted by node %d at %.2f s", t.EvictedBy, t.EvictedS)
	}
	if t.Rounds == 0 {
		return evicted + "; no failover round logged"
	}
	rounds := "1 round"
	if t.Rounds > 1 {
		rounds = fmt.Sprintf("%d rounds", t.Rounds)
	}
	return fmt.Sprintf("%s; %d leaders elected in %s, the last stored at %.2f s (longest round %.2f s)",
		evicted, t.Elected, rounds, t.ElectedS, t.LongestRoundS)
}
