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

// State file layout, big-endian. Version 1, a file written whole and
// renamed into place:
//
//	magic "PCST" | version u8 | flags u8 | Confirmed i64 | ConfirmedCount i64 |
//	n u32 | n × (Start i64, End i64, Count i64) | CRC-32C of everything before it
//
// Version 2 adds seq u64 after flags and may be followed by bytes of an
// older, longer record: a channel keeps two files, `<channel>.state` and
// `<channel>.state.1`, and overwrites in place the one that does not hold
// its newest durable state, so a torn write leaves that one whole. The
// record with the higher seq is the state.
const (
	stateMagic       = "PCST"
	stateVersion     = 1
	stateSlotVersion = 2
	stateHeaderSize  = 4 + 1 + 1 + 8 + 8 + 4
	stateSeqSize     = 8
	stateCRCSize     = 4
	intervalSize     = 24
	stateFlagPaused  = 1
	stateSuffix      = ".state"
	stateSlotSuffix  = ".state.1" // the second file
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

// marshalSlot is the version 2 record of s, numbered seq.
func (s ChannelState) marshalSlot(seq uint64) []byte { return s.marshalVersion(stateSlotVersion, seq) }

func (s ChannelState) marshalVersion(version byte, seq uint64) []byte {
	b := make([]byte, 0, stateHeaderSize+stateSeqSize+intervalSize*len(s.Intervals)+stateCRCSize)
	b = append(b, stateMagic...)
	var flags byte
	if s.Paused {
		flags |= stateFlagPaused
	}
	b = append(b, version, flags)
	if version == stateSlotVersion {
		b = binary.BigEndian.AppendUint64(b, seq)
	}
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

// unmarshalStateRecord reads a file of either version and the record's
// seq (0 for version 1).
func unmarshalStateRecord(b []byte) (ChannelState, uint64, error) {
	var s ChannelState
	if len(b) < stateHeaderSize+stateCRCSize {
		return s, 0, fmt.Errorf("%d bytes, shorter than a header", len(b))
	}
	if string(b[:4]) != stateMagic {
		return s, 0, fmt.Errorf("bad magic %q", b[:4])
	}
	version, flags := b[4], b[5]
	at := 6
	var seq uint64
	switch version {
	case stateVersion:
	case stateSlotVersion:
		if len(b) < stateHeaderSize+stateSeqSize+stateCRCSize {
			return s, 0, fmt.Errorf("%d bytes, shorter than a header", len(b))
		}
		seq = binary.BigEndian.Uint64(b[at:])
		at += stateSeqSize
	default:
		return s, 0, fmt.Errorf("unknown version %d", version)
	}
	n := int64(binary.BigEndian.Uint32(b[at+16:]))
	want := int64(at+8+8+4) + intervalSize*n + stateCRCSize
	switch {
	case version == stateVersion && int64(len(b)) != want:
		return s, 0, fmt.Errorf("%d bytes, %d intervals need %d", len(b), n, want)
	case int64(len(b)) < want:
		return s, 0, fmt.Errorf("%d bytes, %d intervals need %d", len(b), n, want)
	}
	b = b[:want] // a version 2 record may be followed by an older one's tail
	body, sum := b[:len(b)-stateCRCSize], binary.BigEndian.Uint32(b[len(b)-stateCRCSize:])
	if crc32.Checksum(body, crcTable) != sum {
		return s, 0, errors.New("checksum mismatch")
	}
	if flags&^stateFlagPaused != 0 {
		return s, 0, fmt.Errorf("unknown flags %#02x", flags)
	}
	s.Paused = flags&stateFlagPaused != 0
	s.Confirmed = int64(binary.BigEndian.Uint64(b[at:]))
	s.ConfirmedCount = int64(binary.BigEndian.Uint64(b[at+8:]))
	at += 8 + 8 + 4
	if n > 0 {
		s.Intervals = make([]Interval, n)
		for i := range s.Intervals {
			o := at + intervalSize*i
			s.Intervals[i] = Interval{
				Start: int64(binary.BigEndian.Uint64(b[o:])),
				End:   int64(binary.BigEndian.Uint64(b[o+8:])),
				Count: int64(binary.BigEndian.Uint64(b[o+16:])),
			}
		}
	}
	return s, seq, s.validate()
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

// SaveChannelState replaces the state of channel in partition directory dir,
// durably when it returns. A channel's first state is a temporary file
// synced and renamed into place; later ones overwrite the channel's other
// file, so a crash leaves either the old state or the new one.
func SaveChannelState(dir, channel string, s ChannelState) error {
	path, err := channelStatePath(dir, channel)
	if err != nil {
		return err
	}
	if err := s.validate(); err != nil {
		return fmt.Errorf("storage: channel %q state: %w", channel, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	_, m, err := readSlots(path)
	if err != nil && !errors.Is(err, ErrCorruptState) {
		return err
	}
	_, err = saveSlot(path, s, m)
	return err
}

// slotMark is where a channel's newest durable state is: which of its two
// files, and the record's seq.
type slotMark struct {
	slot  int // 0: <channel>.state, 1: <channel>.state.1
	seq   uint64
	found bool
}

// next is the file the state after m goes to, never the one holding m's,
// and its seq.
func (m slotMark) next() (slot int, seq uint64) {
	if !m.found {
		return 0, m.seq + 1
	}
	return 1 - m.slot, m.seq + 1
}

// slotPath is the file of slot for the state whose first file is path.
func slotPath(path string, slot int) string {
	if slot == 0 {
		return path
	}
	return strings.TrimSuffix(path, stateSuffix) + stateSlotSuffix
}

// readSlots reads both files of the state at path and answers the valid
// record with the higher seq. A damaged file beside a valid one is a torn
// overwrite, not an error; with no valid one it wraps ErrCorruptState.
func readSlots(path string) (ChannelState, slotMark, error) {
	var (
		best    ChannelState
		m       slotMark
		damaged error
	)
	for slot := range 2 {
		p := slotPath(path, slot)
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return ChannelState{}, slotMark{}, err
		}
		if len(b) == 0 {
			// Made, and its first write lost in a crash: a state saved
			// through the journal is written in place even the first
			// time, and was not yet durable.
			continue
		}
		s, seq, err := unmarshalStateRecord(b)
		if err != nil {
			damaged = fmt.Errorf("%w: %s: %v", ErrCorruptState, p, err)
			continue
		}
		if !m.found || seq > m.seq {
			best, m = s, slotMark{slot: slot, seq: seq, found: true}
		}
	}
	if !m.found && damaged != nil {
		return ChannelState{}, slotMark{}, damaged
	}
	return best, m, nil
}

// saveSlot makes s durable as the state after m and returns its mark.
func saveSlot(path string, s ChannelState, m slotMark) (slotMark, error) {
	if m.found {
		slot, seq := m.next()
		err := writeSlotFile(slotPath(path, slot), s.marshalSlot(seq), true)
		if err == nil {
			return slotMark{slot: slot, seq: seq, found: true}, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return m, err
		}
		// The channel's directory went with its partition's: start over.
		m = slotMark{}
	}
	slot, seq := m.next()
	tmp, err := writeStateFile(path, s.marshalSlot(seq))
	if err != nil {
		return m, err
	}
	if err = syncFile(tmp); err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return m, err
	}
	return slotMark{slot: slot, seq: seq, found: true}, syncDir(filepath.Dir(path))
}

// writeSlotFile overwrites the start of the file at p with rec, making
// the file if there is none; with sync, durably. Bytes past rec stay:
// the record says its length.
func writeSlotFile(p string, rec []byte, sync bool) error {
	f, err := os.OpenFile(p, os.O_WRONLY, 0)
	created := false
	if errors.Is(err, os.ErrNotExist) {
		f, err = os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		created = true
	}
	if err != nil {
		return err
	}
	_, err = f.WriteAt(rec, 0)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && sync && created {
		err = syncDir(filepath.Dir(p))
	}
	return err
}

func syncFile(p string) error {
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeSlots removes both files of the state at path, the second first:
// a crash between leaves the first, and the channel, if made again,
// delivers from its old state, more rather than less.
func removeSlots(path string) error {
	for _, slot := range []int{1, 0} {
		if err := os.Remove(slotPath(path, slot)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// LoadChannelState reads the state of channel. found is false when it has
// none. A damaged file with no valid one beside it gives an error wrapping
// ErrCorruptState.
func LoadChannelState(dir, channel string) (s ChannelState, found bool, err error) {
	path, err := channelStatePath(dir, channel)
	if err != nil {
		return s, false, err
	}
	s, m, err := readSlots(path)
	if err != nil {
		return ChannelState{}, errors.Is(err, ErrCorruptState), err
	}
	return s, m.found, nil
}

// RemoveChannelState deletes the state of channel; none is not an error.
func RemoveChannelState(dir, channel string) error {
	path, err := channelStatePath(dir, channel)
	if err != nil {
		return err
	}
	return removeSlotsDurably(path)
}

// removeSlotsDurably removes the state at path and syncs its directory.
func removeSlotsDurably(path string) error {
	if err := removeSlots(path); err != nil {
		return err
	}
	if err := syncDir(filepath.Dir(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
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
		if !ok {
			name, ok = strings.CutSuffix(e.Name(), stateSlotSuffix)
		}
		if ok && e.Type().IsRegular() && checkChannelName(name) == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
