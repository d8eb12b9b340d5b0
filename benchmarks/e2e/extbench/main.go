// Command extbench publishes MPUB_EXT batches closed loop, as nsqd's
// bench_writer does MPUBs: each of --conns connections sends a batch and
// waits for its answer, for --runfor. Every message carries a JSON header
// naming it by a unique ID, under the key --id-key: "##msg_id" makes the
// publishes idempotent on a topic with a dedupe window, any other key
// sends headers of the same size that name nothing. Comparing the two on
// topics with and without a window gives the cost of idempotence.
//
//	extbench --nsqd-tcp-address=127.0.0.1:14150 --topic=idem --batch-size=200 --id-key=##msg_id
package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	addr, topic, idKey string
	partition          int
	size, batch, conns int
	runfor             time.Duration
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "extbench:", err)
		os.Exit(2)
	}
	n, elapsed, err := run(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "extbench:", err)
		os.Exit(1)
	}
	fmt.Printf("duration: %s - %.03fmb/s - %.03fops/s - %.03fus/op\n",
		elapsed, float64(n*int64(cfg.size))/(1<<20)/elapsed.Seconds(), float64(n)/elapsed.Seconds(), float64(elapsed.Microseconds())/float64(n))
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("extbench", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.addr, "nsqd-tcp-address", "127.0.0.1:4150", "<addr>:<port> of the partition's leader")
	fs.StringVar(&cfg.topic, "topic", "ext_bench", "ext topic to publish to")
	fs.IntVar(&cfg.partition, "partition", 0, "partition to publish to")
	fs.StringVar(&cfg.idKey, "id-key", "##msg_id", "header key naming each message")
	fs.IntVar(&cfg.size, "size", 200, "bytes of each message's body")
	fs.IntVar(&cfg.batch, "batch-size", 200, "messages per MPUB_EXT")
	fs.IntVar(&cfg.conns, "conns", runtime.GOMAXPROCS(0), "connections publishing at once")
	fs.DurationVar(&cfg.runfor, "runfor", 10*time.Second, "how long to publish")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	switch {
	case fs.NArg() > 0:
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	case cfg.size < 1 || cfg.batch < 1 || cfg.conns < 1 || cfg.runfor <= 0:
		return cfg, errors.New("--size, --batch-size, --conns and --runfor must be positive")
	case cfg.idKey == "":
		return cfg, errors.New("--id-key is empty")
	}
	return cfg, nil
}

// run publishes from every connection until runfor passes and returns the
// messages acknowledged and the time taken; any refused batch fails it.
func run(cfg config) (int64, time.Duration, error) {
	var acked atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, cfg.conns)
	start := time.Now()
	deadline := start.Add(cfg.runfor)
	for c := range cfg.conns {
		wg.Go(func() { errs[c] = publish(cfg, strconv.Itoa(c), deadline, &acked) })
	}
	wg.Wait()
	return acked.Load(), time.Since(start), errors.Join(errs...)
}

// publish sends batches on one connection until deadline, each message's
// ID made of prefix and a sequence number.
func publish(cfg config, prefix string, deadline time.Time, acked *atomic.Int64) error {
	conn, err := net.DialTimeout("tcp", cfg.addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	w, r := bufio.NewWriterSize(conn, 1<<20), bufio.NewReader(conn)
	if _, err := w.WriteString("  V2"); err != nil {
		return err
	}
	body := make([]byte, cfg.size)
	var cmd []byte
	seq := 0
	for time.Now().Before(deadline) {
		cmd = appendBatch(cmd[:0], cfg, prefix, &seq, body)
		if _, err := w.Write(cmd); err != nil {
			return err
		}
		if err := w.Flush(); err != nil {
			return err
		}
		if err := readOK(r); err != nil {
			return err
		}
		acked.Add(int64(cfg.batch))
	}
	return nil
}

// appendBatch appends one MPUB_EXT of cfg.batch messages: each a 2-byte
// header length, the header naming it, and the body.
func appendBatch(b []byte, cfg config, prefix string, seq *int, body []byte) []byte {
	b = fmt.Appendf(b, "MPUB_EXT %s %d\n", cfg.topic, cfg.partition)
	sizeAt := len(b)
	b = append(b, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(cfg.batch))
	for range cfg.batch {
		*seq++
		header := fmt.Appendf(nil, `{%q:%q}`, cfg.idKey, prefix+"-"+strconv.Itoa(*seq))
		b = binary.BigEndian.AppendUint32(b, uint32(2+len(header)+len(body)))
		b = binary.BigEndian.AppendUint16(b, uint16(len(header)))
		b = append(b, header...)
		b = append(b, body...)
	}
	binary.BigEndian.PutUint32(b[sizeAt:], uint32(len(b)-sizeAt-4))
	return b
}

// readOK reads frames until the answer to the batch: OK, or an error.
func readOK(r *bufio.Reader) error {
	for {
		var head [8]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return err
		}
		size, typ := binary.BigEndian.Uint32(head[:4]), binary.BigEndian.Uint32(head[4:])
		if size < 4 {
			return fmt.Errorf("frame of %d bytes", size)
		}
		data := make([]byte, size-4)
		if _, err := io.ReadFull(r, data); err != nil {
			return err
		}
		switch {
		case typ == 0 && string(data) == "_heartbeat_":
			continue
		case typ == 0 && string(data) == "OK":
			return nil
		default:
			return fmt.Errorf("answered %q", data)
		}
	}
}
