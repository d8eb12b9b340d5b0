package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

// fuzzLimits are small so that huge declared sizes fail fast instead of
// allocating megabytes per input.
func fuzzLimits() Limits {
	lim := DefaultLimits()
	lim.MaxBodySize = 4096
	lim.MaxMsgSize = 1024
	return lim
}

func FuzzReadCommand(f *testing.F) {
	seeds := [][]byte{
		cat([]byte(MagicV2), []byte("IDENTIFY\n"), sized([]byte(`{"client_id":"a","feature_negotiation":true,"heartbeat_interval":1000}`))),
		cat([]byte("IDENTIFY\n"), sized([]byte(`{"snappy":true,"deflate":true,"feature_negotiation":true}`))),
		cat([]byte("IDENTIFY\n"), sized([]byte(`{"output_buffer_size":-1,"msg_timeout":1}`))),
		cat([]byte("IDENTIFY\n"), sized([]byte(`{`))),
		cat([]byte("AUTH\n"), sized([]byte("secret"))),
		cat([]byte("PUB test\n"), sized([]byte("hello"))),
		cat([]byte("PUB test\r\n"), sized(nil)),
		cat([]byte("MPUB test\n"), mpubBody([]byte("a"), []byte("bb"))),
		cat([]byte("MPUB test\n"), rawSize(100), rawSize(-1)),
		cat([]byte("DPUB test 1000\n"), sized([]byte("later"))),
		cat([]byte("DPUB test -1\n"), sized([]byte("x"))),
		[]byte("SUB test ch#ephemeral\nRDY 10\nRDY\nRDY -1\n"),
		[]byte("FIN 0123456789abcdef\nREQ 0123456789abcdef 500\nTOUCH 0123456789abcdef\n"),
		[]byte("FIN \nREQ 0123456789abcdef x\nTOUCH zzzzzzzzzzzzzzzz\n"),
		[]byte("CLS\nNOP\n\n\n"),
		[]byte("ASDF\x00\xff garbage \r\r\n"),
		cat([]byte("PUB t\n"), rawSize(1<<31-1)),
		cat([]byte("PUB t\n"), rawSize(-1<<31)),
		cat([]byte("MPUB t\n"), rawSize(4000), rawSize(1<<30)),
		cat([]byte("IDENTIFY\n"), rawSize(-5)),
		cat([]byte("AUTH\n"), rawSize(1<<31-1)),
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		lim := fuzzLimits()
		r := bufio.NewReaderSize(bytes.NewReader(in), 16*1024)
		for range 1000 {
			cmd, err := ReadCommand(r)
			if err != nil {
				if !isReadError(err) {
					t.Fatalf("ReadCommand error %v (%T) is not a read error", err, err)
				}
				return
			}
			err = dispatchForFuzz(r, cmd, lim)
			var pe *Error
			switch {
			case err == nil:
			case errors.As(err, &pe):
				if pe.Code == "" || pe.Text == "" {
					t.Fatalf("empty code or text in %#v", pe)
				}
				if pe.Fatal {
					return
				}
			default:
				t.Fatalf("%s: error %v (%T) is neither *Error nor a read error", cmd.Name, err, err)
			}
		}
	})
}

func isReadError(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, bufio.ErrBufferFull)
}

// dispatchForFuzz calls what a session would call for each command name.
func dispatchForFuzz(r *bufio.Reader, cmd Command, lim Limits) error {
	param := func(i int) []byte {
		if i < len(cmd.Params) {
			return cmd.Params[i]
		}
		return nil
	}
	for _, p := range cmd.Params {
		IsValidTopicName(string(p))
		IsEphemeral(string(p))
	}
	switch cmd.Name {
	case "IDENTIFY":
		body, err := ReadIdentifyBody(r, lim.MaxBodySize)
		if err != nil {
			return err
		}
		_, err = NegotiateIdentify(body, lim)
		return err
	case "AUTH":
		_, err := ReadAuthBody(r, lim.MaxBodySize)
		return err
	case "PUB":
		_, err := ReadMessageBody(r, "PUB", lim.MaxMsgSize)
		return err
	case "DPUB":
		if _, err := ParseDeferMS(param(1), lim.MaxReqTimeout); err != nil {
			return err
		}
		_, err := ReadMessageBody(r, "DPUB", lim.MaxMsgSize)
		return err
	case "MPUB":
		_, err := ReadMPUBBody(r, lim.MaxBodySize, lim.MaxMsgSize)
		return err
	case "RDY":
		_, err := ParseRDY(cmd.Params, lim.MaxRdyCount)
		return err
	case "FIN", "TOUCH":
		_, err := ParseMessageID(param(0))
		return err
	case "REQ":
		if _, err := ParseMessageID(param(0)); err != nil {
			return err
		}
		d, err := ParseReqTimeout(param(1))
		if err == nil && d < 0 {
			return Fatal(E_INVALID, "negative delay %v", d)
		}
		return err
	case "SUB", "CLS", "NOP":
		return nil
	}
	return Fatal(E_INVALID, "invalid command %s", cmd.Name)
}

// The fuzz target only checks for panics and error types; this pins down
// that its dispatch reaches the codec at all on a known input.
func TestFuzzDispatchSmoke(t *testing.T) {
	in := cat([]byte("PUB t\n"), sized([]byte("x")), []byte("REQ 0123456789abcdef 10\nASDF\n"))
	r := bufio.NewReader(bytes.NewReader(in))
	var got []string
	for {
		cmd, err := ReadCommand(r)
		if err != nil {
			break
		}
		if err := dispatchForFuzz(r, cmd, fuzzLimits()); err != nil {
			got = append(got, err.Error())
		} else {
			got = append(got, cmd.Name)
		}
	}
	want := []string{"PUB", "REQ", "E_INVALID invalid command ASDF"}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d = %q, want %q", i, got[i], want[i])
		}
	}
}
