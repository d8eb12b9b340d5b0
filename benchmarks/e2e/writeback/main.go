// Command writeback measures what the disk does for messages spread over
// many partitions, laid out two ways: a segment file and a commit log per
// partition, synced by one syncfs(2) every interval (what a node does), or
// one journal per node that every partition's records are appended to in
// gathered writes, synced by one fdatasync(2) every interval (the
// node-wide journal of RocketMQ's CommitLog or BookKeeper's journal). It
// writes each message as copies nodes would, each copy in a directory of
// its own on the same filesystem, and reports the device's writes, the
// syncs' durations, the appends' latencies and the CPU per message.
//
//	go run ./writeback --dir=/var/tmp/wb --layout=files --partitions=10000 --rate=4000
//	go run ./writeback --dir=/var/tmp/wb --layout=journal --partitions=10000 --rate=4000
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type config struct {
	dir        string
	layout     string
	partitions int
	copies     int
	rate       int
	duration   time.Duration
	sync       time.Duration
	gather     time.Duration
	message    int
	commit     int
}

func main() {
	var c config
	flag.StringVar(&c.dir, "dir", "", "directory on the filesystem to measure (emptied first)")
	flag.StringVar(&c.layout, "layout", "files", "files: a segment and a commit log per partition, syncfs; journal: one file per copy, fdatasync")
	flag.IntVar(&c.partitions, "partitions", 10000, "partitions the messages are spread over, round robin")
	flag.IntVar(&c.copies, "copies", 3, "copies of each message, as replicas on that many nodes")
	flag.IntVar(&c.rate, "rate", 4000, "messages per second")
	flag.DurationVar(&c.duration, "duration", 20*time.Second, "how long to write")
	flag.DurationVar(&c.sync, "sync", 2*time.Second, "interval between syncs (--sync-timeout)")
	flag.DurationVar(&c.gather, "gather", time.Millisecond, "journal: how long records gather before one write")
	flag.IntVar(&c.message, "message", 230, "bytes of a message record (a 200-byte body and NSQ's header)")
	flag.IntVar(&c.commit, "commit", 48, "bytes of a commit record")
	flag.Parse()
	if c.dir == "" {
		log.Fatal("--dir is required")
	}
	if err := run(c); err != nil {
		log.Fatal(err)
	}
}

// copyOf is one node's files.
type copyOf struct {
	dir      string
	segments []*os.File
	commits  []*os.File
	ends     []int64 // per partition: segment end, then commit log end
	journal  *os.File
	jend     int64
	pending  []byte
}

func run(c config) error {
	if err := os.RemoveAll(c.dir); err != nil {
		return err
	}
	copies := make([]*copyOf, c.copies)
	for i := range copies {
		cp, err := open(c, filepath.Join(c.dir, fmt.Sprintf("node%d", i+1)))
		if err != nil {
			return err
		}
		defer cp.close()
		copies[i] = cp
	}
	dev, err := deviceOf(c.dir)
	if err != nil {
		return err
	}
	unix.Sync()
	before, err := readDiskstats(dev)
	if err != nil {
		return err
	}
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)

	stop := make(chan struct{})
	var mu sync.Mutex // syncs
	var syncs []time.Duration
	var wg sync.WaitGroup
	for _, cp := range copies {
		wg.Go(func() {
			t := time.NewTicker(c.sync)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
				}
				start := time.Now()
				if err := cp.syncAll(); err != nil {
					log.Fatal(err)
				}
				mu.Lock()
				syncs = append(syncs, time.Since(start))
				mu.Unlock()
			}
		})
	}

	record := make([]byte, c.message)
	commit := make([]byte, c.commit)
	var appends []time.Duration
	every := time.Second / time.Duration(c.rate)
	start := time.Now()
	lastGather := start
	sent := 0
	for p := 0; time.Since(start) < c.duration; p = (p + 1) % c.partitions {
		if wait := time.Until(start.Add(time.Duration(sent) * every)); wait > 0 {
			time.Sleep(wait)
		}
		for _, cp := range copies {
			t0 := time.Now()
			switch c.layout {
			case "files":
				if err := cp.appendFiles(p, record, commit); err != nil {
					return err
				}
				appends = append(appends, time.Since(t0))
			default:
				cp.pending = append(cp.pending, record...)
				cp.pending = append(cp.pending, commit...)
			}
		}
		sent++
		if c.layout == "journal" && time.Since(lastGather) >= c.gather {
			lastGather = time.Now()
			for _, cp := range copies {
				t0 := time.Now()
				if err := cp.writeJournal(); err != nil {
					return err
				}
				appends = append(appends, time.Since(t0))
			}
		}
	}
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()
	for _, cp := range copies {
		if err := cp.writeJournal(); err != nil {
			return err
		}
		if err := cp.syncAll(); err != nil {
			return err
		}
	}
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	after, err := readDiskstats(dev)
	if err != nil {
		return err
	}
	cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
	data := float64(sent) * float64(c.copies*(c.message+c.commit))
	written := float64(after.sectors-before.sectors) * 512
	fmt.Printf("layout=%s partitions=%d copies=%d rate=%d/s for %.1fs, sync every %v\n", c.layout, c.partitions, c.copies, c.rate, elapsed.Seconds(), c.sync)
	fmt.Printf("  messages %d; data %.1f MB; device wrote %.1f MB in %d writes (%.1f× the data; %.0f writes/s, %.1f MB/s)\n",
		sent, data/1e6, written/1e6, after.writes-before.writes, written/data, float64(after.writes-before.writes)/elapsed.Seconds(), written/1e6/elapsed.Seconds())
	fmt.Printf("  syncs %d: p50 %v, max %v\n", len(syncs), quantile(syncs, 0.5), quantile(syncs, 1))
	fmt.Printf("  append calls %d: p50 %v, p99 %v, max %v\n", len(appends), quantile(appends, 0.5), quantile(appends, 0.99), quantile(appends, 1))
	fmt.Printf("  CPU %.2f s, %.1f µs per message (all copies)\n", cpu.Seconds(), float64(cpu.Microseconds())/float64(sent))
	return nil
}

func open(c config, dir string) (*copyOf, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cp := &copyOf{dir: dir}
	if c.layout == "journal" {
		f, err := os.OpenFile(filepath.Join(dir, "journal"), os.O_CREATE|os.O_RDWR, 0o644)
		cp.journal = f
		return cp, err
	}
	if c.layout != "files" {
		return nil, fmt.Errorf("unknown layout %q", c.layout)
	}
	for p := range c.partitions {
		pdir := filepath.Join(dir, strconv.Itoa(p))
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			return nil, err
		}
		seg, err := os.OpenFile(filepath.Join(pdir, "00000000000000000000.log"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		com, err := os.OpenFile(filepath.Join(pdir, "commit.log"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		cp.segments = append(cp.segments, seg)
		cp.commits = append(cp.commits, com)
	}
	cp.ends = make([]int64, 2*c.partitions)
	return cp, nil
}

func (cp *copyOf) appendFiles(p int, record, commit []byte) error {
	if _, err := cp.segments[p].WriteAt(record, cp.ends[2*p]); err != nil {
		return err
	}
	cp.ends[2*p] += int64(len(record))
	if _, err := cp.commits[p].WriteAt(commit, cp.ends[2*p+1]); err != nil {
		return err
	}
	cp.ends[2*p+1] += int64(len(commit))
	return nil
}

func (cp *copyOf) writeJournal() error {
	if cp.journal == nil || len(cp.pending) == 0 {
		return nil
	}
	n, err := cp.journal.WriteAt(cp.pending, cp.jend)
	cp.jend += int64(n)
	cp.pending = cp.pending[:0]
	return err
}

// syncAll is the copy's sync every interval: its filesystem's syncfs, or
// its journal's fdatasync. Appends go on beside it, on their own files.
func (cp *copyOf) syncAll() error {
	if cp.journal != nil {
		return unix.Fdatasync(int(cp.journal.Fd()))
	}
	d, err := os.Open(cp.dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

func (cp *copyOf) close() {
	for _, f := range append(cp.segments, cp.commits...) {
		f.Close()
	}
	if cp.journal != nil {
		cp.journal.Close()
	}
}

type diskstats struct{ writes, sectors uint64 }

// deviceOf names the block device holding dir as /proc/diskstats does.
func deviceOf(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d %d", unix.Major(st.Dev), unix.Minor(st.Dev)), nil
}

func readDiskstats(dev string) (diskstats, error) {
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return diskstats{}, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 10 || f[0]+" "+f[1] != dev {
			continue
		}
		writes, _ := strconv.ParseUint(f[7], 10, 64)
		sectors, _ := strconv.ParseUint(f[9], 10, 64)
		return diskstats{writes, sectors}, nil
	}
	return diskstats{}, fmt.Errorf("device %s not in /proc/diskstats (tmpfs?)", dev)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1))]
}
