// Command node runs one Partita node: an NSQ-compatible broker whose topic
// partitions live on disk, with metadata in etcd.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/partitamq/partita/node"
)

func main() {
	cfg, fs, err := node.LoadConfig(os.Args[1:], os.Getenv)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "partita:", err)
		os.Exit(2)
	}
	cfg.LevelVar = new(slog.LevelVar)
	cfg.LevelVar.Set(cfg.SlogLevel())
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.LevelVar}))
	slog.SetDefault(log)
	setGCPercent(cfg, fs, log)
	node.RaiseOpenFileLimit(log)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	n, err := node.Start(ctx, cfg, log)
	cancel()
	if err != nil {
		log.Error("start failed", "err", err)
		os.Exit(1)
	}

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	s := <-sig
	log.Info("shutting down", "signal", s.String())
	done := make(chan error, 1)
	go func() { done <- n.Close() }()
	select {
	case err := <-done:
		if err != nil {
			log.Error("shutdown", "err", err)
			os.Exit(1)
		}
		log.Info("stopped")
	case <-time.After(cfg.ShutdownTimeout):
		log.Error("shutdown timed out", "after", cfg.ShutdownTimeout)
		os.Exit(1)
	}
}

// setGCPercent applies --gc-percent unless only GOGC was given. A node's
// live heap is small and steady while it allocates for every message, so
// Go's default of 100 collects several times a second under load, and each
// cycle's pauses and assists land on the publish latency tail; 400 costs a
// few tens of MB and a quarter of the cycles.
func setGCPercent(cfg node.Config, fs *flag.FlagSet, log *slog.Logger) {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "gc-percent" })
	if !set && os.Getenv("GOGC") != "" {
		log.Debug("garbage collection target from GOGC", "GOGC", os.Getenv("GOGC"))
		return
	}
	debug.SetGCPercent(cfg.GCPercent)
}
