package node

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/partitamq/partita/httpapi"
)

func TestOptionsShowFlagsAndChangeOnlyTheLogLevel(t *testing.T) {
	cfg, _, err := LoadConfig([]string{"--log-level", "warn", "--data-path", "/var/lib/partita",
		"--default-replicas", "2", "--write-timeout", "3s", "--snappy=false"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	level := new(slog.LevelVar)
	level.Set(cfg.SlogLevel())
	o := &liveOptions{cfg: cfg, level: level}

	for _, c := range []struct {
		name string
		want any
	}{
		{"log_level", 3}, // nsqd's WARN
		{"data_path", "/var/lib/partita"},
		{"default_replicas", 2},
		{"write_timeout", 3 * time.Second},
		{"snappy", false},
	} {
		got, err := o.Option(c.name)
		if err != nil || got != c.want {
			t.Errorf("Option(%q) = %v (%T), %v; want %v (%T)", c.name, got, got, err, c.want, c.want)
		}
	}
	for _, name := range []string{"nosuch", "log-level", ""} {
		if _, err := o.Option(name); !errors.Is(err, httpapi.ErrNoOption) {
			t.Errorf("Option(%q): %v, want ErrNoOption", name, err)
		}
	}

	got, err := o.SetOption("log_level", []byte("debug"))
	if err != nil || got != 1 {
		t.Fatalf("SetOption(log_level, debug) = %v, %v; want 1", got, err)
	}
	if level.Level() != slog.LevelDebug {
		t.Fatalf("the logger's level is %v after log_level=debug", level.Level())
	}
	if got, _ := o.Option("log_level"); got != 1 {
		t.Fatalf("log_level reads %v after it was set to debug", got)
	}
	if _, err := o.SetOption("log_level", []byte("loud")); !errors.Is(err, httpapi.ErrOptionValue) {
		t.Fatalf("log_level=loud: %v, want ErrOptionValue", err)
	}
	if level.Level() != slog.LevelDebug {
		t.Fatalf("a refused value changed the level to %v", level.Level())
	}
	if _, err := o.SetOption("data_path", []byte("/tmp")); !errors.Is(err, httpapi.ErrFixedOption) {
		t.Fatalf("data_path: %v, want ErrFixedOption", err)
	}
	if _, err := o.SetOption("nosuch", []byte("1")); !errors.Is(err, httpapi.ErrNoOption) {
		t.Fatalf("nosuch: %v, want ErrNoOption", err)
	}

	fixed := &liveOptions{cfg: cfg}
	if _, err := fixed.SetOption("log_level", []byte("info")); !errors.Is(err, httpapi.ErrFixedOption) {
		t.Fatalf("log_level on a node without a LevelVar: %v, want ErrFixedOption", err)
	}
}

func TestOptionsHideSecrets(t *testing.T) {
	for _, name := range []string{"http-admin-token", "auth-secret", "etcd-password"} {
		if !hidden(name) {
			t.Errorf("--%s is shown by /config", name)
		}
	}
	if hidden("tls-key") {
		t.Error("--tls-key, a path, is hidden")
	}
}
