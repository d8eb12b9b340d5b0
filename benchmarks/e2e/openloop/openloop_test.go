package openloop

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakePublisher answers every publish after delay, with err when fail
// says so, or never when silent says so.
type fakePublisher struct {
	tally  *Tally
	delay  time.Duration
	fail   func(n int64) bool
	silent func(n int64) bool
	n      atomic.Int64
	sizes  chan int
}

func (f *fakePublisher) Publish(body []byte, r Release) error {
	n := f.n.Add(1)
	f.sizes <- len(body)
	if f.silent != nil && f.silent(n) {
		return nil
	}
	var err error
	if f.fail != nil && f.fail(n) {
		err = fmt.Errorf("publish %d refused", n)
	}
	time.AfterFunc(f.delay, func() { f.tally.Answer(r, err) })
	return nil
}

func (f *fakePublisher) Close() {}

func TestRunKeepsTheScheduleAndCountsAnswers(t *testing.T) {
	const delay = 100 * time.Millisecond
	cfg := Config{Rate: 2000, Connections: 3, Senders: 2, Duration: 250 * time.Millisecond, Size: 7, Drain: 5 * time.Second}
	sizes := make(chan int, 1000)
	var pubs []*fakePublisher
	res, err := Run(cfg, func(tally *Tally) (Publisher, error) {
		second := len(pubs) == 1
		p := &fakePublisher{tally: tally, delay: delay, sizes: sizes,
			fail: func(n int64) bool { return second && n%10 == 0 }}
		pubs = append(pubs, p)
		return p, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 250 ms at 2,000/s is 500 publishes, dealt round robin to 3
	// connections; the second connection refuses every tenth of its 167.
	if res.Sent != 500 || res.Errors != 16 || res.Acked != 484 || res.Unanswered != 0 {
		t.Fatalf("sent %d acked %d errors %d unanswered %d, want 500 / 484 / 16 / 0",
			res.Sent, res.Acked, res.Errors, res.Unanswered)
	}
	if got := []int64{pubs[0].n.Load(), pubs[1].n.Load(), pubs[2].n.Load()}; got[0] != 167 || got[1] != 167 || got[2] != 166 {
		t.Fatalf("publishes per connection %v, want 167 167 166", got)
	}
	if res.FirstError == nil || !strings.Contains(res.FirstError.Error(), "refused") {
		t.Fatalf("first error %v, want the refusal", res.FirstError)
	}
	if res.Span >= cfg.Duration+delay {
		t.Fatalf("500 publishes took %v: sends waited for answers", res.Span)
	}
	for _, l := range res.Latencies {
		if l < delay {
			t.Fatalf("latency %v below the publisher's delay %v", l, delay)
		}
	}
	if len(res.Lags) != 500 {
		t.Fatalf("%d schedule lags, want one per publish", len(res.Lags))
	}
	close(sizes)
	for s := range sizes {
		if s != cfg.Size {
			t.Fatalf("a body of %d bytes, want %d", s, cfg.Size)
		}
	}
}

func TestPublishesNeverAnsweredCountAsUnanswered(t *testing.T) {
	cfg := Config{Rate: 1000, Connections: 1, Senders: 1, Duration: 100 * time.Millisecond, Size: 1, Drain: 0}
	res, err := Run(cfg, func(tally *Tally) (Publisher, error) {
		return &fakePublisher{tally: tally, sizes: make(chan int, 1000),
			silent: func(n int64) bool { return n > 40 }}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Drain 0 gathers at once; answers of the first 40 may still be on
	// their way, so only the silent ones are certain.
	if res.Sent != 100 || res.Unanswered < 60 || res.Acked+res.Unanswered != 100 || res.Errors != 0 {
		t.Fatalf("sent %d acked %d errors %d unanswered %d, want 100 sent, at least 60 unanswered",
			res.Sent, res.Acked, res.Errors, res.Unanswered)
	}
}

func TestOpenErrorsAbortTheRun(t *testing.T) {
	closed := 0
	opened := 0
	_, err := Run(Config{Rate: 10, Connections: 3, Senders: 1, Duration: time.Second, Size: 1},
		func(tally *Tally) (Publisher, error) {
			if opened == 2 {
				return nil, errors.New("refused")
			}
			opened++
			return closer{&closed}, nil
		})
	if err == nil || closed != 2 {
		t.Fatalf("err %v, %d of 2 opened connections closed", err, closed)
	}
}

type closer struct{ n *int }

func (c closer) Publish([]byte, Release) error { return nil }
func (c closer) Close()                        { *c.n++ }

func TestPrintNamesTheFiguresRunShReads(t *testing.T) {
	r := Result{Sent: 3, Acked: 2, Errors: 1, Latencies: []time.Duration{300 * time.Microsecond, 100 * time.Microsecond},
		Lags: []time.Duration{time.Microsecond}, Span: time.Second, FirstError: errors.New("boom")}
	var out bytes.Buffer
	r.Print(&out, Config{Rate: 3, Connections: 1, Duration: time.Second, Size: 200})
	for _, want := range []string{
		"sent: 3 acked: 2 errors: 1 unanswered: 0 (3 msgs/s)\n",
		"latency µs: p50 100 p90 300 p99 300 p99.9 300 max 300\n",
		"first error: boom\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Microsecond
	}
	for _, tc := range []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{nil, 50, 0},
		{[]time.Duration{7}, 99.9, 7},
		{hundred, 50, 50 * time.Microsecond},
		{hundred, 90, 90 * time.Microsecond},
		{hundred, 99, 99 * time.Microsecond},
		{hundred, 99.9, 100 * time.Microsecond},
		{hundred, 100, 100 * time.Microsecond},
		{hundred, 0.5, 1 * time.Microsecond},
	} {
		t.Run(fmt.Sprintf("n=%d/p=%v", len(tc.sorted), tc.p), func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBadLoadsAreRefused(t *testing.T) {
	good := Config{Rate: 1, Connections: 1, Senders: 1, Duration: time.Second, Size: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*Config){
		"rate 0":        func(c *Config) { c.Rate = 0 },
		"rate NaN":      func(c *Config) { c.Rate = math.NaN() },
		"connections 0": func(c *Config) { c.Connections = 0 },
		"senders 0":     func(c *Config) { c.Senders = 0 },
		"duration 0":    func(c *Config) { c.Duration = 0 },
		"size 0":        func(c *Config) { c.Size = 0 },
		"drain -1s":     func(c *Config) { c.Drain = -time.Second },
	} {
		c := good
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s accepted", name)
		}
	}
}
