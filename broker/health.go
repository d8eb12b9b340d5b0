package broker

import (
	"fmt"
)

// diskHealth records a partition's disk health for Health.
func (b *Broker) diskHealth(partition string) func(error) {
	return func(err error) {
		b.healthMu.Lock()
		defer b.healthMu.Unlock()
		if err == nil {
			delete(b.unhealthy, partition)
			return
		}
		if b.unhealthy == nil {
			b.unhealthy = make(map[string]error)
		}
		b.unhealthy[partition] = err
	}
}

// Health is nil while every partition's disk writes work, else one of the
// errors, as nsqd's /ping reports "NOK - <error>".
func (b *Broker) Health() error {
	b.healthMu.Lock()
	defer b.healthMu.Unlock()
	for p, err := range b.unhealthy {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}
