package node

import (
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/partitamq/partita/httpapi"
)

// liveOptions is the node's configuration for GET and PUT /config/:opt.
// Only the log level changes while the node runs: every other option is
// read by the parts of the node when they start.
type liveOptions struct {
	mu    sync.Mutex
	cfg   Config
	level *slog.LevelVar // nil: the logger's level is fixed
}

// nsqd's log levels as its /config/log_level shows them.
var nsqLogLevels = map[string]int{"debug": 1, "info": 2, "warn": 3, "error": 4}

// Option is the value of the flag named like name, with dashes for its
// underscores, as the flag holds it (a string, number, boolean or
// duration); log_level is nsqd's number for the level, as nsqd answers it.
// Options that hold credentials are not shown.
func (o *liveOptions) Option(name string) (any, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if name == "log_level" {
		return nsqLogLevels[o.cfg.LogLevel], nil
	}
	f := o.flag(name)
	if f == nil || hidden(f.Name) {
		return nil, fmt.Errorf("%q: %w", name, httpapi.ErrNoOption)
	}
	if g, ok := f.Value.(flag.Getter); ok {
		return g.Get(), nil
	}
	return f.Value.String(), nil
}

// SetOption changes log_level, given by name (debug, info, warn, error;
// nsqd's fatal is error here) as nsqd takes it.
func (o *liveOptions) SetOption(name string, value []byte) (any, error) {
	f := o.flagLocked(name)
	switch {
	case f == nil || hidden(f.Name):
		return nil, fmt.Errorf("%q: %w", name, httpapi.ErrNoOption)
	case name != "log_level" || o.level == nil:
		return nil, fmt.Errorf("%q: %w", name, httpapi.ErrFixedOption)
	}
	v := strings.ToLower(strings.TrimSpace(string(value)))
	if v == "fatal" {
		v = "error"
	}
	if _, ok := nsqLogLevels[v]; !ok {
		return nil, fmt.Errorf("log_level %q: %w", value, httpapi.ErrOptionValue)
	}
	o.mu.Lock()
	o.cfg.LogLevel = v
	o.level.Set(o.cfg.SlogLevel())
	o.mu.Unlock()
	return o.Option(name)
}

func (o *liveOptions) flagLocked(name string) *flag.Flag {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.flag(name)
}

// flag finds the option's flag, bound to a copy of the configuration.
func (o *liveOptions) flag(name string) *flag.Flag {
	if name == "" || strings.Contains(name, "-") {
		return nil
	}
	c := new(Config)
	fs := newFlagSet(c)
	*c = o.cfg
	return fs.Lookup(strings.ReplaceAll(name, "_", "-"))
}

// hidden: flags whose values are secrets, or lead to them.
func hidden(flagName string) bool {
	for _, s := range []string{"secret", "token", "password"} {
		if strings.Contains(flagName, s) {
			return true
		}
	}
	return false
}
