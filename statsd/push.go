package statsd

import (
	"log/slog"
	"net"
	"time"
)

// Config is the --statsd-* flags, nsqd's.
type Config struct {
	Address          string // UDP host:port of the daemon; empty: no pushes
	Prefix           string // already expanded (Prefix)
	Interval         time.Duration
	PacketSize       int
	ExcludeEphemeral bool
}

// Start pushes sample's report every interval until the returned stop is
// called. As nsqd does, each push opens its UDP socket anew, so a daemon
// that moved to another address behind the same name is found.
func Start(cfg Config, sample func() Sample, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(cfg.Interval)
		defer tick.Stop()
		var prev Sample
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			cur := sample()
			if err := push(cfg, Packets(cfg.Prefix, Report(prev, cur, cfg.ExcludeEphemeral), cfg.PacketSize)); err != nil {
				log.Warn("statsd push failed", "address", cfg.Address, "err", err)
			}
			prev = cur
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

func push(cfg Config, packets [][]byte) error {
	c, err := net.DialTimeout("udp", cfg.Address, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range packets {
		if _, err := c.Write(p); err != nil {
			return err
		}
	}
	return nil
}
