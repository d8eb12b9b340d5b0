package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrCorruptState is wrapped by LoadChannelState's error for a channel state
// file that is torn or damaged.
var ErrCorruptState = errors.New("corrupt channel state")

// Interval is a range [Start, End) of log bytes holding Count messages that
// were all finished although bytes before it were not.
type Interval struct{ Start, End, Count int64 }

// ChannelState is what a channel must remember across restarts.
type ChannelState struct {
	Confirmed      int64 // every message before this offset is finished
	ConfirmedCount int64 // messages before Confirmed
	Intervals      []Interval
	Paused         bool
}

// State file layout, big-endian:
//
//	magic "PCST" | version u8 | flags u8 | Confirmed i64 | ConfirmedCount i64 |
//	n u32 | n × (Start i64, End i64, Count i64) | CRC-32C of everything before it
const (
	stateMagic       = "PCST"
	stateVersion     = 1
	stateHeaderSize  = 4 + 1 + 1 + 8 + 8 + 4
	stateCRCSize     = 4
	intervalSize     = 24
	stateFlagPaused  = 1
	stateSuffix      = ".state"
	channelsDir      = "channels"
	maxChannelName   = 200     // leaves room for the temp-file suffix within 255 bytes
	maxStateInterval = 1 << 27 // keeps a damaged count from asking for gigabytes
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Equal reports whether s and o say the same: saving one where the other
// is saved changes nothing.
func (s ChannelState) Equal(o ChannelState) bool {
	return s.Confirmed == o.Confirmed && s.ConfirmedCount == o.ConfirmedCount && s.Paused == o.Paused &&
		slices.Equal(s.Intervals, o.Intervals)
}

func (s ChannelState) validate() error {
	if s.Confirmed < 0 || s.ConfirmedCount < 0 {
		return fmt.Errorf("negative confirmed offset %d or count %d", s.Confirmed, s.ConfirmedCount)
	}
	if len(s.Intervals) > maxStateInterval {
		return fmt.Errorf("%d intervals, at most %d", len(s.Intervals), maxStateInterval)
	}
	prevEnd := s.Confirmed
	for i, iv := range s.Intervals {
		if iv.Start < prevEnd || iv.End <= iv.Start || iv.Count < 0 {
			return fmt.Errorf("interval %d [%d, %d) is empty, unordered or not after %d", i, iv.Start, iv.End, prevEnd)
		}
		prevEnd = iv.End
	}
	return nil
}

func (s ChannelState) marshal() []byte {
	b := make([]byte, 0, stateHeaderSize+intervalSize*len(s.Intervals)+stateCRCSize)
	b = append(b, stateMagic...)
	var flags byte
	if s.Paused {
		flags |= stateFlagPaused
	}
	b = append(b, stateVersion, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(s.Confirmed))
	b = binary.BigEndian.AppendUint64(b, uint64(s.ConfirmedCount))
	b = binary.BigEndian.AppendUint32(b, uint32(len(s.Intervals)))
	for _, iv := range s.Intervals {
		b = binary.BigEndian.AppendUint64(b, uint64(iv.Start))
		b = binary.BigEndian.AppendUint64(b, uint64(iv.End))
		b = binary.BigEndian.AppendUint64(b, uint64(iv.Count))
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

func unmarshalChannelState(b []byte) (ChannelState, error) {
	var s ChannelState
	if len(b) < stateHeaderSize+stateCRCSize {
		return s, fmt.Errorf("%d bytes, shorter than a header", len(b))
	}
	if string(b[:4]) != stateMagic {
		return s, fmt.Errorf("bad magic %q", b[:4])
	}
	body, sum := b[:len(b)-stateCRCSize], binary.BigEndian.Uint32(b[len(b)-stateCRCSize:])
	if crc32.Checksum(body, crcTable) != sum {
		return s, errors.New("checksum mismatch")
	}
	if b[4] != stateVersion {
		return s, fmt.Errorf("unknown version %d", b[4])
	}
	if b[5]&^stateFlagPaused != 0 {
		return s, fmt.Errorf("unknown flags %#02x", b[5])
	}
	s.Paused = b[5]&stateFlagPaused != 0
	s.Confirmed = int64(binary.BigEndian.Uint64(b[6:]))
	s.ConfirmedCount = int64(binary.BigEndian.Uint64(b[14:]))
	n := int64(binary.BigEndian.Uint32(b[22:]))
	if want := stateHeaderSize + intervalSize*n + stateCRCSize; int64(len(b)) != want {
		return s, fmt.Errorf("%d bytes, %d intervals need %d", len(b), n, want)
	}
	if n > 0 {
		s.Intervals = make([]Interval, n)
		for i := range s.Intervals {
			at := stateHeaderSize + intervalSize*i
			s.Intervals[i] = Interval{
				Start: int64(binary.BigEndian.Uint64(b[at:])),
				End:   int64(binary.BigEndian.Uint64(b[at+8:])),
				Count: int64(binary.BigEndian.Uint64(b[at+16:])),
			}
		}
	}
	return s, s.validate()
}

func checkChannelName(channel string) error {
	if channel == "" || channel == "." || channel == ".." || len(channel) > maxChannelName ||
		strings.ContainsAny(channel, "/\\\x00") {
		return fmt.Errorf("storage: channel name %q cannot be a file name", channel)
	}
	return nil
}

func channelStatePath(dir, channel string) (string, error) {
	if err := checkChannelName(channel); err != nil {
		return "", err
	}
	return filepath.Join(dir, channelsDir, channel+stateSuffix), nil
}

// SaveChannelState replaces the state of channel in partition directory dir.
// It writes a temporary file, syncs it and renames it over the old one, so a
// crash leaves either the old state or the new one.
func SaveChannelState(dir, channel string, s ChannelState) error {
	path, err := channelStatePath(dir, channel)
	if err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("storage: channel %q state: %w", channel, err)
	}
	cdir := filepath.Dir(path)
	if err := os.MkdirAll(cdir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(cdir, channel+stateSuffix+".tmp*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(s.marshal())
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return syncDir(cdir)
}

// LoadChannelState reads the state of channel. found is false when it has
// none. A damaged file gives an error wrapping ErrCorruptState.
func LoadChannelState(dir, channel string) (s ChannelState, found bool, err error) {
	path, err := channelStatePath(dir, channel)
	if err != nil {
		return s, false, err
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	s, err = unmarshalChannelState(b)
	if err != nil {
		return ChannelState{}, true, fmt.Errorf("%w: %s: %v", ErrCorruptState, path, err)
	}
	return s, true, nil
}

// RemoveChannelState deletes the state of channel; none is not an error.
func RemoveChannelState(dir, channel string) error {
	path, err := channelStatePath(dir, channel)
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

// ListChannelStates returns the channels that have a state file, sorted.
func ListChannelStates(dir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(dir, channelsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), stateSuffix)
		if ok && e.Type().IsRegular() && checkChannelName(name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}
